"""A change measured while other processes used the pinned CPUs is no evidence of the candidate (pure): such an
alarm is decided again on the quiet pairs alone, and with none quiet it is `undecided` (host busy).

Self-hosted GPU machines run several runners at once. Measured here (docs/benchmarks.md#a-busy-host): with a second
compare or a 50%-duty CPU hog on the pinned CPU, A/A intervals left out 1.00 in 2 of 4 runs and one read "1.29x
faster"; the interval is not calibrated under contention. A pair counts as busy when processes other than the
compare's own used more than BUSY_SHARE of its pinned CPUs while it measured (orchestrate.hostload); a quiet host's
own noise (kernel threads, the runner's agent) stays well below it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from torch_upgrade_check.analysis import ab
from torch_upgrade_check.model import ABState

BUSY_SHARE = 0.15


def busy(share: float | None) -> bool:
    return share is not None and share > BUSY_SHARE


def decide(batches: Sequence[ab.Batch], shares: Sequence[float | None], threshold: float, *, alpha: float,
           final: bool, floor: float = 0.0, increase: str = "slowdown") -> ab.Decision:
    """ab.decide over every pair; when that calls a change or cannot rule one out (anything but `unchanged`, or
    `pending` while more pairs can be measured) and some pairs ran on a busy host, ab.decide over the quiet pairs
    alone, and `undecided` (host busy) when none was quiet. An `unchanged` is kept: the busy pairs did not make it."""
    d = ab.decide(batches, threshold, alpha=alpha, final=final, floor=floor, increase=increase)
    noisy = [busy(s) for s in shares]
    if not any(noisy) or d.state in (ABState.UNCHANGED, ABState.PENDING):
        return d
    quiet = [b for b, n in zip(batches, noisy) if not n]
    worst = max(s for s in shares if s is not None)
    said = f"{sum(noisy)} of {len(batches)} process pairs ran on a busy host (others used up to {worst:.0%} of the " \
           f"pinned CPUs) and were set aside"
    if quiet:
        q = ab.decide(quiet, threshold, alpha=alpha, final=final, floor=floor, increase=increase)
        return replace(q, why=f"{q.why}; {said}")
    state = ABState.UNDECIDED if final else ABState.PENDING
    return ab.Decision(state, math.nan, math.nan, math.nan, 1.0, d.baseline_median, d.candidate_median, d.rounds,
                       d.batches, 0, f"host busy: {said}, none was quiet; rerun on an idle runner", -1 if final else 0,
                       threshold=threshold)


def words(shares: Sequence[float | None]) -> dict[str, object]:
    """What a result's metrics keep of the host's load: each pair's foreign share of the pinned CPUs."""
    known = [s for s in shares if s is not None]
    return {"host_busy_shares": [None if s is None else round(s, 3) for s in shares],
            "host_busy_pairs": sum(busy(s) for s in shares), "host_busy_limit": BUSY_SHARE} if known else {}
