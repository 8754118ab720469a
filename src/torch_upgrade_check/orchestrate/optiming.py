"""compare's op-latency check: the aten ops of one recorded forward and backward (the baseline's, at the team's
shapes: worker.opreplay), each timed on both sides (the aspect's run.py, aspects/op_latency/) and judged op by op
(analysis.optiming), so a single op's regression is named even where the model-level latency passes. It warns
(`suspicious`); it never fails.
An op the baseline timed that the candidate could not (it raised there, or is no op of the candidate's torch) is
named and warns too, never a pass on what was not compared; it does not fail, since the replay calls the baseline's
recorded op with the baseline's arguments, which a candidate that renamed an op or changed its schema refuses while
the model's own code calls the new form: whether the model runs is the other checks' (cross-version, latency) verdict.

Measured after the A/B checks, as they are: PAIRS fresh baseline/candidate pairs (measure.Pair: the same threads,
pinned CPUs and environment), every op-latency check in each. In the first pair the baseline records the ops (unless
cross-version's recording is there) and calibrates each op's calls a sample (half a millisecond of its own time);
the MAX_TIMED ops that take the most of the recorded step (calls times time) are kept. Each pair then measures a
warm-up round (discarded) and ROUNDS rounds, ABBA, an op's figure a side a round being the fastest of 3 samples
(its run.py). Bounded: about 1.5 ms an op a side a round, so a round of MAX_TIMED ops about 75 ms a side.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from torch_upgrade_check.analysis import optiming
from torch_upgrade_check.analysis.verdicts import decide
from torch_upgrade_check.model import CheckResult, CheckSpec, Observation, Outcome, Status
from torch_upgrade_check.orchestrate.live import LiveWorker
from torch_upgrade_check.orchestrate.measure import Pair, close

PAIRS = optiming.MIN_PAIRS
ROUNDS = 8
MAX_TIMED = 48
KEPT_ROWS = 20  # ops kept in report.json, slowest first


@dataclass
class OpTrack:
    spec: CheckSpec
    keys: list[str] | None = None
    inner: dict[str, int] = field(default_factory=dict)
    ops: dict[str, dict[str, Any]] = field(default_factory=dict)  # key -> op, inputs, count, pairs
    not_timed: dict[str, str] = field(default_factory=dict)  # key -> why (a side's error, or not timeable)
    baseline_timed: set[str] = field(default_factory=set)
    candidate_untimed: dict[str, str] = field(default_factory=dict)  # key -> why the candidate could not time it
    recorded: dict[str, Any] = field(default_factory=dict)
    failed: tuple[Observation, Observation] | None = None
    skipped: str = ""
    seconds: float = 0.0

    @property
    def open(self) -> bool:
        return self.failed is None and not self.skipped


def ops_file(spec: CheckSpec) -> Path:
    """Where the baseline's recording is: cross-version's, under the report folder's baseline-outputs/."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{spec.workload}-{spec.dtype}-{spec.device}")
    return Path(spec.params["store"]) / f"{safe}.ops.pt"


def measure(specs: Sequence[CheckSpec], pair: Pair, *, timeout_s: float, say: Callable[[str], None],
            on_result: Callable[[CheckResult, CheckResult], None],
            launched: tuple[LiveWorker, LiveWorker] | None = None) -> None:
    """Time every spec's ops in PAIRS fresh pairs; `on_result` gets each check's baseline and candidate results."""
    tracks = [OpTrack(s) for s in specs]
    for p in range(PAIRS):
        todo = [t for t in tracks if t.open]
        if not todo:
            break
        say(f"op-latency pair {p + 1} of {PAIRS}: {len(todo)} check{'s' if len(todo) != 1 else ''}, each recorded op "
            f"timed on both sides")
        with pair.start(f"ops{p + 1}", (), launched) as (b, c):
            launched = None
            for t in todo:
                started = time.monotonic()
                _measure_pair(t, b, c, p, timeout_s)
                t.seconds += time.monotonic() - started
    if launched:
        close(*launched)
    for t in tracks:
        on_result(*results(t))


def _ask(t: OpTrack, worker: LiveWorker, timeout_s: float, **params: Any) -> Observation:
    spec = replace(t.spec, params={**t.spec.params, "ops_file": str(ops_file(t.spec)), **params})
    return worker.request(spec, timeout_s)


def _failed(t: OpTrack, obs: Observation, side: str) -> bool:
    if obs.status == Status.OK:
        return False
    if obs.status == Status.SKIPPED:
        t.skipped = obs.message or "skipped"
        return True
    other = Observation(t.spec.id, Status.SKIPPED, message="the other side failed first")
    failed = Observation(t.spec.id, obs.status, message=obs.message, traceback=obs.traceback, duration_s=obs.duration_s)
    t.failed = (failed, other) if side == "b" else (other, failed)
    return True


def _timed(t: OpTrack, obs: Observation, side: str) -> dict[str, float]:
    """key -> ms a call of one side's answer; what it could not time is noted, once."""
    got = {}
    for row in obs.metrics.get("ops") or []:
        key = row.get("key")
        why = row.get("not_timed") or row.get("error")
        if why:
            who = "" if row.get("not_timed") else f"{'baseline' if side == 'b' else 'candidate'}: "
            t.not_timed.setdefault(key, f"{who}{why}")
            if side == "c":
                t.candidate_untimed.setdefault(key, str(why))
        elif isinstance(row.get("ms"), (int, float)) and row["ms"] > 0:
            got[key] = float(row["ms"])
            if side == "b":
                t.baseline_timed.add(key)
            t.ops.setdefault(key, {"op": row.get("op"), "inputs": row.get("inputs"), "count": row.get("count"),
                                   "pairs": []})
    return got


def _measure_pair(t: OpTrack, b: LiveWorker, c: LiveWorker, p: int, timeout_s: float) -> None:
    if p == 0:
        obs = _ask(t, b, timeout_s, mode="record")
        if _failed(t, obs, "b"):
            return
        t.recorded = {k: v for k, v in obs.metrics.items() if k.startswith("ops_") or k == "reused"}
        calibration = _ask(t, b, timeout_s, mode="time")  # every distinct op, its calls a sample found here
        if _failed(t, calibration, "b"):
            return
        rows = [r for r in calibration.metrics.get("ops") or [] if isinstance(r.get("ms"), (int, float))]
        rows.sort(key=lambda r: -(float(r["ms"]) * float(r.get("count") or 1)))
        t.keys = [r["key"] for r in rows[:MAX_TIMED]]
        t.inner = {r["key"]: int(r.get("inner") or 1) for r in rows[:MAX_TIMED]}
        _timed(t, calibration, "b")
    sides = (("b", b), ("c", c))
    for side, worker in sides:  # a warm-up round: discarded
        obs = _ask(t, worker, timeout_s, mode="time", keys=t.keys, inner=t.inner)
        if _failed(t, obs, side):
            return
        _timed(t, obs, side)
    for op in t.ops.values():
        op["pairs"].append([])
    for r in range(ROUNDS):
        got: dict[str, dict[str, float]] = {}
        for side, worker in sides if r % 2 == 0 else sides[::-1]:
            obs = _ask(t, worker, timeout_s, mode="time", keys=t.keys, inner=t.inner)
            if _failed(t, obs, side):
                return
            got[side] = _timed(t, obs, side)
        for key, op in t.ops.items():
            if key in got["b"] and key in got["c"]:
                op["pairs"][-1].append((got["b"][key], got["c"][key]))


def results(t: OpTrack) -> tuple[CheckResult, CheckResult]:
    """The baseline's result (what it recorded, the reference) and the candidate's (the judgement)."""
    spec = t.spec
    if t.failed is not None:
        return decide(spec, t.failed[0]), decide(spec, t.failed[1])
    common = {"workload": spec.workload, "aspect": spec.aspect, "device": spec.device, "dtype": spec.dtype,
              "duration_s": round(t.seconds / 2, 3)}
    if t.skipped:
        return (CheckResult(**common, outcome=Outcome.SKIPPED, reason=t.skipped),
                CheckResult(**common, outcome=Outcome.SKIPPED, reason=t.skipped))
    j = optiming.judge({k: v for k, v in t.ops.items() if k in (t.keys or [])})
    recorded = t.recorded.get("ops_recorded")
    base = CheckResult(**common, outcome=Outcome.PASSED, metrics=dict(t.recorded),
                       reason=f"the reference: {len(t.ops)} distinct ops of its recorded forward and backward timed"
                              + (f" ({recorded} calls recorded)" if recorded else "")
                              + (" (cross-version's recording)" if t.recorded.get("reused") else ""))
    outcome = {"slower": Outcome.SUSPICIOUS, "unchanged": Outcome.PASSED}.get(j.state, Outcome.SKIPPED)
    skipped = f"; {len(t.not_timed)} not timed (see report.json)" if t.not_timed else ""
    reason, lost = j.reason + skipped, lost_on_candidate(t)
    if lost:  # the baseline timed them and the candidate could not: never a pass on what was not compared
        outcome, reason = Outcome.SUSPICIOUS, f"{_lost_text(t, lost)}; {reason}"
    metrics = {"ops": [_rounded(r) for r in j.rows[:KEPT_ROWS]], "slower_ops": [optiming.label(r) for r in j.flagged],
               "ops_timed": len(j.rows), "ops_not_timed": dict(list(t.not_timed.items())[:20]),
               **({"ops_failed_on_candidate": dict(list(lost.items())[:20])} if lost else {}),
               "pairs": PAIRS, "rounds": ROUNDS, "max_timed": MAX_TIMED, **t.recorded}
    details = "\n".join([*(f"not timed on the candidate: {_label(t, k)}: {why}" for k, why in lost.items()), j.details])
    cand = CheckResult(**common, outcome=outcome, reason=reason, metrics=metrics, details=details.strip(),
                       thresholds={"op_latency_factor": optiming.FACTOR, "op_latency_alpha": optiming.ALPHA})
    return base, cand


def lost_on_candidate(t: OpTrack) -> dict[str, str]:
    """key -> why, for each op kept for timing that the baseline timed and the candidate could not (it raised there,
    or is no op of the candidate's torch)."""
    kept = set(t.keys or [])
    return {k: why for k, why in t.candidate_untimed.items() if k in t.baseline_timed and k in kept}


def _label(t: OpTrack, key: str) -> str:
    return optiming.label(t.ops[key]) if key in t.ops else key


def _lost_text(t: OpTrack, lost: dict[str, str]) -> str:
    """"1 op the baseline timed could not be timed on the candidate, so its latency was never compared:
    aten.gelu.default float32[32, 128] (NotImplementedError: …)"."""
    shown = "; ".join(f"{_label(t, k)} ({why})" for k, why in list(lost.items())[:optiming.SHOWN])
    more = f"; and {len(lost) - optiming.SHOWN} more" if len(lost) > optiming.SHOWN else ""
    one = len(lost) == 1
    return (f"{len(lost)} op{'' if one else 's'} the baseline timed could not be timed on the candidate, so "
            f"{'its' if one else 'their'} latency was never compared: {shown}{more}")


def _rounded(row: dict[str, Any]) -> dict[str, Any]:
    return {k: round(v, 6) if isinstance(v, float) and math.isfinite(v) else v for k, v in row.items()}
