"""Each check's timeout, sized from its workload's forward as this side measured it (no torch; pure).

Before its checks, the first worker of a side times each workload's warm eager forward and counts the aten ops it
dispatches (worker.pace). A check's expected time is its aspect's cost (aspects.Aspect): `forwards` times that
forward, plus `compiles` times (COMPILE_S + OP_S an op). Its timeout is that, never under the floor (BASE_S, the
fixed default before sizing: small models keep it) and never over the cap (CAP_S: a hang is still stopped within
half an hour). A `--timeout` the team gives (the action's `check-timeout-seconds`) always wins. A check expected to
outlive its timeout (the cap, or the team's value) is named at the start of the run with the value to set; it still
runs, and may finish in time: the figures are rough, and err high.

Why these two: torchvision's mobilenet_v3_small's compile check outlived the fixed 300 s on a loaded 2-core machine,
where the built-in models' compile checks take under 30 s. The checks that run the model take what its forward
takes (measured on this side, under this side's load: the built-in mlp's 50 µs forward took 120 ms with 13 processes
sharing 2 cores); an Inductor compile takes what the graph's size asks, which the op count tracks and the forward's
time does not (a few large matmuls compile in seconds).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from torch_upgrade_check.aspects import ASPECT
from torch_upgrade_check.model import CheckSpec

BASE_S = 300.0  # the floor: the fixed per-check timeout before sizing
CAP_S = 1800.0  # a sized timeout's ceiling: past it, the team sets --timeout (and a hang costs at most this)
# One compile of a forward and its training step on a loaded 2-core CPU: COMPILE_S, plus OP_S an aten op of the
# forward. Measured with torch 2.13.0 on the shared 2-core machine, 13 processes on it: the built-in mlp's compile
# check (8 ops) took 51 s (7 s quiet); a mobilenet_v3_small-like network (199 ops, batch 2 at 224x224) took 298 s to
# compile its forward alone (about 1.5 s an op; the training step about doubles it); torchvision's
# mobilenet_v3_small's check outlived 300 s. Rounded up: a guide, not a promise.
COMPILE_S = 30.0
OP_S = 3.0
SETTING = "--timeout SECONDS (the action's input and the config's key check-timeout-seconds)"


class Pace(NamedTuple):
    """What the worker measured of a workload: its warm forward's seconds, the aten ops it dispatches (None: not
    measured)."""

    forward_s: float | None
    ops: int | None = None


@dataclass(frozen=True)
class Budget:
    """How a check's timeout is found: `fixed_s` (the team's --timeout) always; else what its aspect's cost and its
    workload's pace expect, within [`base_s`, `cap_s`]; `base_s` where nothing was measured. `pace_s`: the most one
    workload's build and timed forwards may take (past it the worker is killed, and the workload's checks keep
    `base_s`)."""

    base_s: float = BASE_S
    cap_s: float = CAP_S
    fixed_s: float | None = None
    pace_s: float = BASE_S

    @property
    def sized(self) -> bool:
        """Whether the forward is measured and timeouts sized from it (no --timeout given)."""
        return self.fixed_s is None

    def timeout(self, aspect: str, pace: Pace | None) -> float:
        """The check's timeout in seconds."""
        if self.fixed_s is not None:
            return self.fixed_s
        need = expected(aspect, pace)
        return self.base_s if need is None else min(self.cap_s, max(self.base_s, need))


def expected(aspect: str, pace: Pace | None) -> float | None:
    """Seconds a check of `aspect` is expected to take at `pace`; None where it is not sized or nothing was timed."""
    known = ASPECT.get(aspect)
    forward = pace.forward_s if pace is not None else None
    if known is None or not (known.forwards or known.compiles) or forward is None or not math.isfinite(forward) \
            or forward < 0:
        return None
    ops = pace.ops if pace is not None and pace.ops is not None else 0
    return known.forwards * forward + known.compiles * (COMPILE_S + OP_S * ops)


@dataclass(frozen=True)
class Unfit:
    """A check expected to outlive its timeout: what to set, and why."""

    check: str
    pace: Pace
    expected_s: float
    timeout_s: float

    def line(self) -> str:
        """"mlp[float32]/compile: about 2400 s expected (its workload's forward 120 ms, 1500 aten ops), over its
        1800 s timeout; set --timeout 2400 (…) to give it time"."""
        ops = f", {self.pace.ops} aten ops" if self.pace.ops is not None else ""
        return (f"{self.check}: about {self.expected_s:.0f} s expected (its workload's forward "
                f"{_ms(self.pace.forward_s or 0.0)}{ops}), over its {self.timeout_s:g} s timeout; set "
                f"{SETTING.replace('SECONDS', str(suggest(self.expected_s)))} to give it time")


def timeouts(budget: Budget, specs: Sequence[CheckSpec], paces: Mapping[str, Pace]) -> dict[str, float]:
    """Each check's timeout, by check id, from its workload's pace (`paces`, by workload)."""
    return {s.id: budget.timeout(s.aspect, paces.get(s.workload)) for s in specs}


def unfit(budget: Budget, specs: Sequence[CheckSpec], paces: Mapping[str, Pace]) -> list[Unfit]:
    """The checks expected to take longer than their timeout, in plan order."""
    found = []
    for s in specs:
        pace = paces.get(s.workload)
        need = expected(s.aspect, pace)
        limit = budget.timeout(s.aspect, pace)
        if need is not None and pace is not None and need > limit:
            found.append(Unfit(s.id, pace, need, limit))
    return found


def suggest(seconds: float) -> int:
    """A round value to set: the expected time, rounded up to the next 100 s."""
    return int(math.ceil(seconds / 100.0) * 100)


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"


def slowest(recorded: Sequence[object]) -> dict[str, Pace]:
    """Per workload, the slower of the sides' paces as their reports keep them (`thresholds.paces`: {workload:
    {"forward_s", "ops"}}); what is not a number is skipped."""
    forwards: dict[str, list[float]] = {}
    ops: dict[str, list[int]] = {}
    for paces in recorded:
        for workload, figures in (paces.items() if isinstance(paces, Mapping) else ()):
            if not isinstance(figures, Mapping):
                continue
            forward, count = figures.get("forward_s"), figures.get("ops")
            if isinstance(forward, (int, float)) and not isinstance(forward, bool):
                forwards.setdefault(str(workload), []).append(float(forward))
            if isinstance(count, int) and not isinstance(count, bool):
                ops.setdefault(str(workload), []).append(count)
    return {w: Pace(max(f), max(ops[w]) if w in ops else None) for w, f in forwards.items()}


def to_pace(specs: Sequence[CheckSpec]) -> list[CheckSpec]:
    """One check a workload whose forward sizes a timeout: the first of it whose aspect is sized (its device, dtype
    and factory are what the forward is timed with)."""
    chosen: dict[str, CheckSpec] = {}
    for s in specs:
        known = ASPECT.get(s.aspect)
        if known is not None and (known.forwards or known.compiles) and s.workload not in chosen:
            chosen[s.workload] = s
    return list(chosen.values())
