"""compare's attribution of a slower forward to aten ops: after an A/B latency check ends `regression` or `undecided`,
both sides' forwards are profiled op by op (worker.opprofile) and set against each other (analysis.attribution).

Each round starts a fresh baseline/candidate pair, as the A/B does (the same interpreters, threads, pinned CPUs and
environment: measure.Pair), asks each side for one profile (the order alternating, ABBA, as the A/B's rounds) and
closes the pair: process-level variation, the largest here, is replicated, not averaged away inside one process.
The workers ready the CPU profiler before they are pinned (its first use costs seconds), as the memory A/B's do.

Bounded: ROUNDS pairs at most, and no round starts once the rounds so far, at their average cost, would pass the
budget (at least BUDGET_S, or 3 times the check's --ab-budget): a forward too slow for FEWEST rounds is attributed
on fewer, without intervals, and says so. Each side profiles `calls` forwards, enough for PROFILE_MS of the
baseline's forward (MAX_CALLS at most), after WARMUP plain ones. A round that fails (a crash, a timeout) ends the
attribution with what the earlier rounds gave and the error; the check's verdict is the A/B's, never changed here.

Which aspects: PROFILED, the A/B aspects that time a forward (aspects.LATENCY_LIKE; each one's run.py gives the
forward it times as `forward`, which worker.opprofile profiles).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from torch_upgrade_check.analysis import attribution
from torch_upgrade_check.aspects import LATENCY_LIKE
from torch_upgrade_check.model import ABState, CheckResult, CheckSpec, Side, Status
from torch_upgrade_check.orchestrate.measure import Pair

PROFILED = LATENCY_LIKE  # a forward, eager or compiled: its run.forward, which worker.opprofile profiles
CHANGES = (ABState.REGRESSION, ABState.UNDECIDED)  # the A/B states whose change is attributed
ROUNDS = 4  # fresh pairs: an op whose 4 rounds a side all read slower has p = 1/70
FEWEST = attribution.FEWEST
BUDGET_S = 60.0
PROFILE_MS = 50.0  # of the baseline's forward a side profiles a round (reading a profile back costs ~3 ms a small MLP's call)
MAX_CALLS = 200
WARMUP = 3


def wanted(result: CheckResult) -> bool:
    """Whether this candidate result's change is attributed: a profiled aspect that ended regression or undecided."""
    return result.aspect in PROFILED and result.metrics.get("change") in CHANGES


def calls_for(baseline_ms: float) -> int:
    """Forwards a side profiles in a round: PROFILE_MS of the baseline's forward, 1 to MAX_CALLS."""
    if not baseline_ms > 0 or not math.isfinite(baseline_ms):
        return 1
    return max(1, min(MAX_CALLS, math.ceil(PROFILE_MS / baseline_ms)))


def attribute(spec: CheckSpec, pair: Pair, *, baseline_ms: float, candidate_ms: float, timeout_s: float,
              ab_budget_s: float, say: Callable[[str], None], rounds: int = ROUNDS, change: str | None = None
              ) -> dict[str, Any]:
    """Profile both sides in up to `rounds` fresh pairs and return the table (analysis.attribution.attribute, shares
    of the A/B's slowdown: `candidate_ms` - `baseline_ms` a forward; none where the A/B's `change` or its point
    estimate is not slower) with what was profiled: rounds, calls, seconds, the time measured (cpu or device) and any
    error."""
    budget = max(BUDGET_S, 3 * ab_budget_s)
    calls = calls_for(baseline_ms)
    ask = replace(spec, params={**spec.params, "profile": True, "calls": calls, "warmup": WARMUP})
    profiles: dict[str, list[dict[str, Any]]] = {"b": [], "c": []}
    started, error, times = time.monotonic(), "", set()
    profiling = replace(pair, warm=("profiler",))
    for k in range(rounds):
        spent = time.monotonic() - started
        if k and spent + spent / k > budget:
            break
        with profiling.start(f"attr{k + 1}", ("profiler",)) as (b, c):
            order = (("b", b), ("c", c)) if k % 2 == 0 else (("c", c), ("b", b))
            got: dict[str, dict[str, Any]] = {}
            for side, worker in order:
                obs = worker.request(ask, timeout_s)
                if obs.status != Status.OK or not isinstance(obs.metrics.get("profile"), dict):
                    who = Side.BASELINE if side == "b" else Side.CANDIDATE
                    error = f"the {who}'s profile in round {k + 1} failed: {obs.status}: {obs.message}"[:300]
                    break
                got[side] = obs.metrics["profile"]
        if error:
            break
        for side in ("b", "c"):
            profiles[side].append(got[side])
            times.add(str(got[side].get("time")))
    seconds = time.monotonic() - started
    table = attribution.attribute(profiles["b"], profiles["c"], ab_ms=(baseline_ms, candidate_ms), change=change)
    table.update({"calls": calls, "seconds": round(seconds, 2), "budget_s": budget, "time": "/".join(sorted(times)),
                  "method": "torch.profiler self time per forward, per aten op at its input shapes and dtypes; each "
                            "round a fresh baseline/candidate pair, ABBA"})
    if error:
        table["error"] = error
    say(f"attributed {spec.id}'s change in {len(profiles['b'])} fresh pairs ({seconds:.0f} s): "
        f"{attribution.lead(table)}"[:300] + (f"; {error}" if error else ""))
    return table
