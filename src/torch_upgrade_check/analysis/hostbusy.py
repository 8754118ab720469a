"""A timing measured while other processes used the pinned CPUs is no evidence of the candidate (pure): an alarm
raised with busy pairs among its pairs is decided again on the quiet pairs alone, and where those do not settle it
the check is `undecided` (host busy), never a regression or an improvement blamed on torch.

Self-hosted GPU machines run several runners at once. Measured (docs/benchmarks.md#a-busy-host): with a second
compare or a CPU hog on the pinned CPU, A/A intervals left out 1.00 in 2 of 4 runs and one read "1.29x faster"; the
interval is not calibrated under contention. A pair is busy when processes other than the compare's own used more
than BUSY_SHARE of its pinned CPUs while it measured (orchestrate.hostload); a quiet host's own noise (kernel
threads, the runner's agent) stays well below it. Only timed aspects set pairs aside: peak memory is counted, not
timed, and a growth measured on a busy host stands.
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
    """ab.decide over every pair; where that is anything but `unchanged` (or `pending` while more pairs can be
    measured) and some pairs were busy, ab.decide over the quiet pairs alone: a change they confirm stands, an
    `unchanged` they find stands; otherwise `undecided` with the reason "host busy: ...". An `unchanged` over every
    pair is kept: the busy pairs did not make it. The decision counts every pair measured (`batches`, `rounds`);
    its `why` says how many were set aside."""
    d = ab.decide(batches, threshold, alpha=alpha, final=final, floor=floor, increase=increase)
    noisy = [busy(s) for s in shares]
    if not any(noisy) or d.state in (ABState.UNCHANGED, ABState.PENDING):
        return d
    quiet = [b for b, n in zip(batches, noisy) if not n]
    said = set_aside(shares, len(batches))
    counts = {"batches": d.batches, "rounds": d.rounds}
    if quiet:
        q = ab.decide(quiet, threshold, alpha=alpha, final=final, floor=floor, increase=increase)
        if q.state in (ABState.REGRESSION, ABState.IMPROVED, ABState.UNCHANGED, ABState.PENDING):
            return replace(q, why=f"{q.why}; {said}", **counts)
    state = ABState.UNDECIDED if final else ABState.PENDING
    return ab.Decision(state, math.nan, math.nan, math.nan, 1.0, d.baseline_median, d.candidate_median, d.rounds,
                       d.batches, 0, f"host busy: {said}; the {len(quiet)} quiet one{'s' if len(quiet) != 1 else ''} "
                       f"settled nothing; rerun on an idle runner", -1 if final else 0, threshold=threshold)


def set_aside(shares: Sequence[float | None], pairs: int) -> str:
    """The words for the busy pairs: how many of how many, and the worst share."""
    n = sum(busy(s) for s in shares)
    worst = max((s for s in shares if s is not None), default=0.0)
    return (f"{n} of {pairs} process pair{'s' if pairs != 1 else ''} ran while other processes used over "
            f"{BUSY_SHARE:.0%} of the pinned CPUs (up to {worst:.0%}) and {'were' if n != 1 else 'was'} set aside")


def words(shares: Sequence[float | None]) -> dict[str, object]:
    """What a result's metrics keep of the host's load: each pair's foreign share of the pinned CPUs, how many pairs
    were set aside as busy (`batches` still counts every pair measured), and the limit."""
    if not any(s is not None for s in shares):
        return {}
    return {"host_busy_shares": [None if s is None else round(s, 3) for s in shares],
            "host_busy_pairs": sum(busy(s) for s in shares), "host_busy_limit": BUSY_SHARE}
