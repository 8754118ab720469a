"""Where a check's series of A/B ratios steps, and whether its newest runs make an alarm (pure: ruptures, no I/O).

The split is ruptures' PELT with an l1 (median) cost on the log ratios: a median cost is not pulled by one far-off
run, and PELT is exact and fast at a history's size (benchmarks/changepoint_libraries.py compared it with Apache
Otava's and MongoDB's E-divisive: docs/benchmarks.md, "Change points"). The penalty is k·sd·ln n, sd the noise: the
median absolute deviation of the log ratios from their median, over the window less its newest MAX_AGE runs (the runs
a fresh step would be in, so the step does not inflate the noise it is judged against). The earlier estimate, from
successive differences over the whole window, came out up to 2.5x the true noise on ~20 runs and missed 7 of 60
steps within 3 runs; this one misses fewer at no A/A alarm (docs/benchmarks.md, "The canary's detector").

An alarm is online: after the newest run, the newest change point must leave 2 to MAX_AGE runs after it, and those
runs must stand above the level before it: all but one (at least two) beyond FLOOR, their median beyond
FLOOR·m/(m-1) for m runs (two runs must stand 2·FLOOR off). Only a step up alarms: every ratio the history keeps
(latency, memory, compile time) is candidate over baseline, so up is worse; a step down is no reason to bisect.
benchmarks/canary_detector.py measures the rule.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

PENALTY_K = 2.25  # benchmarks/canary_detector.py: 2.0 alarmed on 1 of 60 A/A histories, 2.5 found fewer steps in time
FLOOR = math.log(1.05)  # a step smaller than 5% is noise on a shared runner, whatever its significance
MAX_AGE = 4  # runs after a change point within which it still alarms: a step is alarmed on at most the 3rd run after
MIN_RUNS = 10  # a series shorter than this has no level to step from
WINDOW = 120  # the newest runs split: a step is alarmed within MAX_AGE runs, and PELT's l1 cost grows fast with n
MIN_SD = 0.005  # the noise is never taken below 0.5%: a series of identical ratios must not alarm on a rounding step


MISSING = ("change points not computed: ruptures is not installed here; pip install 'torch-upgrade-check[history]' "
           "(first failures, flaky and host-only checks are still reported)")


def available() -> bool:
    """Whether ruptures imports: it is the `history` extra (numpy and scipy), not in every action run's install."""
    try:
        import ruptures  # noqa: F401
    except ImportError:
        return False
    return True


@dataclass(frozen=True)
class Step:
    """A change in a series' level: `index` is the first run at the new level; levels are ratios (medians)."""

    index: int
    before: float
    after: float

    @property
    def factor(self) -> float:
        return self.after / self.before


def noise_sd(logs: Sequence[float]) -> float:
    """The sd of one run's log ratio: the scaled median absolute deviation of the runs before the newest MAX_AGE."""
    # The newest runs are left out only where enough stay to estimate from; an older step left in the window widens
    # the estimate, which errs towards no alarm.
    base = logs[:-MAX_AGE] if len(logs) >= MIN_RUNS + MAX_AGE else logs
    if len(base) < 3:
        return MIN_SD
    centre = statistics.median(base)
    mad = statistics.median(abs(x - centre) for x in base)
    return max(mad / 0.6745, MIN_SD)


def change_points(ratios: Sequence[float], *, k: float | None = None) -> list[int]:
    """The indices where a new level starts (none at 0), oldest first."""
    if len(ratios) < 4:
        return []
    import numpy as np  # ruptures' own dependency; imported here so the CLI starts without it
    import ruptures

    logs = [math.log(r) for r in ratios]
    penalty = (PENALTY_K if k is None else k) * noise_sd(logs) * math.log(len(logs))
    ends = ruptures.Pelt(model="l1", min_size=2, jump=1).fit(np.array(logs)).predict(pen=penalty)
    return [e for e in ends if 0 < e < len(logs)]


def latest_step(ratios: Sequence[float], *, k: float | None = None) -> Step | None:
    """The step the newest runs alarm on, or None (see the module's docstring for the rule)."""
    if len(ratios) < MIN_RUNS or any(not (r > 0 and math.isfinite(r)) for r in ratios):
        return None
    start = max(0, len(ratios) - WINDOW)
    step = step_from(ratios[start:], change_points(ratios[start:], k=k))
    return None if step is None else Step(step.index + start, step.before, step.after)


def step_from(ratios: Sequence[float], cps: Sequence[int]) -> Step | None:
    """The alarm rule on a split made by any library: the newest change point, if its runs stand off its level."""
    if not cps:
        return None
    c = cps[-1]
    if not 2 <= len(ratios) - c <= MAX_AGE:
        return None
    logs = [math.log(r) for r in ratios]
    level = statistics.median(logs[(cps[-2] if len(cps) > 1 else 0):c])
    shifts = [x - level for x in logs[c:]]
    above = sum(d >= FLOOR for d in shifts)
    moved = statistics.median(shifts) >= FLOOR * len(shifts) / (len(shifts) - 1)
    if not (moved and above >= max(2, len(shifts) - 1)):
        return None
    return Step(c, math.exp(level), math.exp(level + statistics.median(shifts)))
