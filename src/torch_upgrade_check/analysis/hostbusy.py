"""A timing measured while other processes used the pinned CPUs is no evidence of the candidate (pure): where any
pair of a timed check was busy, the quiet pairs alone decide it, and where those do not settle it the check is
`undecided` (host busy), never a regression, an improvement or an `unchanged` read on busy pairs.

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
    """ab.decide over every pair where none was busy; where some were, over the quiet pairs alone, whatever every
    pair together said: a change or an `unchanged` they settle stands, with the pairs set aside said; `pending` while
    more pairs can be measured; else `undecided` "host busy: ..." carrying the quiet pairs' estimate (so that
    `--undecided fail` fails it as any undecided check whose estimate is beyond the threshold and significant), or,
    with no quiet pair, no estimate (NaN: it warns under either policy; the busy pairs' reading is in its `why`). The
    decision counts every pair measured (`batches`, `rounds`).

    Busy pairs never decide, in either direction: a neighbour busy while the baseline computes hides a slowdown
    (`unchanged`) as one busy while the candidate computes makes one up. A regression is only ever called by
    ab.decide on the first k quiet pairs, k = MIN_PAIRS..MAX_PAIRS (all pairs where none was busy): the looks
    ab.decide's alpha / LOOKS already pays for, so setting pairs aside spends no more of the false-alarm budget."""
    d = ab.decide(batches, threshold, alpha=alpha, final=final, floor=floor, increase=increase)
    noisy = [busy(s) for s in shares] + [False] * (len(batches) - len(shares))  # a pair with no reading: quiet
    if not any(noisy):
        return d
    quiet = [b for b, n in zip(batches, noisy) if not n]
    said = set_aside(shares, len(batches))
    counts = {"batches": d.batches, "rounds": d.rounds}
    q = ab.decide(quiet, threshold, alpha=alpha, final=final, floor=floor, increase=increase) if quiet else None
    if q is not None and q.state in (ABState.REGRESSION, ABState.IMPROVED, ABState.UNCHANGED):
        return replace(q, why=f"{q.why}; {said}", **counts)
    if not final:
        return replace(q or d, state=ABState.PENDING, why=f"host busy: {said}; measuring more pairs", **counts)
    if q is not None:  # final: ab.decide's undecided over the quiet pairs, its estimate and `beyond` kept
        n = len(quiet)
        return replace(q, why=f"host busy: {said}; over the {n} quiet one{'s' if n != 1 else ''}: {q.why}; rerun on "
                              "an idle runner", **counts)
    return ab.Decision(ABState.UNDECIDED, math.nan, math.nan, math.nan, 1.0, d.baseline_median, d.candidate_median,
                       d.rounds, d.batches, 0, f"host busy: {said}; no quiet pair measured the candidate "
                       f"({read(d)} over the busy ones, no evidence of torch); rerun on an idle runner", -1,
                       threshold=threshold)


def read(d: ab.Decision) -> str:
    """What the busy pairs read, in the words a reviewer knows: "1.88x (95% CI 1.52-2.33)"."""
    if not math.isfinite(d.ratio):
        return "nothing comparable"
    return f"{d.ratio:.2f}× (95% CI {d.ci_low:.2f}–{d.ci_high:.2f})"


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
