"""Summary statistics of timing samples (pure).

Quantiles use linear interpolation between order statistics (NumPy's default, "type 7"), so they
match what users get from numpy.percentile on the raw samples kept in report.json.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence


def quantile(samples: Sequence[float], q: float) -> float:
    if not samples:
        return math.nan
    xs = sorted(samples)
    pos = (len(xs) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def median(samples: Sequence[float]) -> float:
    return quantile(samples, 0.5)


def iqr(samples: Sequence[float]) -> float:
    return quantile(samples, 0.75) - quantile(samples, 0.25)


def mann_whitney_u(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value of the Mann–Whitney U test that `a` and `b` come from the same distribution.

    Normal approximation with tie correction and continuity correction; adequate from about 8
    samples a side, which is what compare's interleaved rounds give (asv uses the same test).
    Returns 1.0 when either side is empty or every value is tied.
    """
    n1, n2 = len(a), len(b)
    if not n1 or not n2:
        return 1.0
    ranked = sorted([(x, 0) for x in a] + [(x, 1) for x in b])
    ranks = [0.0] * len(ranked)
    ties = 0.0
    i = 0
    while i < len(ranked):
        j = i
        while j + 1 < len(ranked) and ranked[j + 1][0] == ranked[i][0]:
            j += 1
        for k in range(i, j + 1):
            ranks[k] = (i + j) / 2 + 1
        t = j - i + 1
        ties += t**3 - t
        i = j + 1
    r1 = sum(r for r, (_, side) in zip(ranks, ranked) if side == 0)
    u1 = r1 - n1 * (n1 + 1) / 2
    n = n1 + n2
    var = n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1)))
    if var <= 0:
        return 1.0
    z = (abs(u1 - n1 * n2 / 2) - 0.5) / math.sqrt(var)
    return max(0.0, min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2))))


def ratio_ci(baseline: Sequence[float], candidate: Sequence[float], *, level: float = 0.95,
             resamples: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """(ratio, low, high): median(candidate)/median(baseline) with a percentile bootstrap interval.

    Seeded, so the same samples always give the same interval.
    """
    ratio = median(candidate) / median(baseline) if baseline and candidate and median(baseline) > 0 else math.nan
    if math.isnan(ratio):
        return ratio, math.nan, math.nan
    rng = random.Random(seed)
    ratios = []
    for _ in range(resamples):
        mb = median(rng.choices(baseline, k=len(baseline)))
        mc = median(rng.choices(candidate, k=len(candidate)))
        if mb > 0:
            ratios.append(mc / mb)
    tail = (1 - level) / 2
    return ratio, quantile(ratios, tail), quantile(ratios, 1 - tail)
