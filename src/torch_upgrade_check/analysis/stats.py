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


def sign_flip_p(diffs: Sequence[float], *, max_exact: int = 16, resamples: int = 20000, seed: int = 0) -> float:
    """Two-sided p-value that paired differences are centred on zero: a sign-flip permutation test.

    Under the null hypothesis every difference is as likely positive as negative, so the observed
    |sum| is compared with the |sum| of every assignment of signs (exactly up to `max_exact`
    differences, else `resamples` seeded random assignments). Makes no assumption about the
    distribution; with n differences the smallest possible p is 2 / 2**n.
    """
    n = len(diffs)
    if n == 0 or all(d == 0 for d in diffs):
        return 1.0
    observed = abs(sum(diffs)) - 1e-12 * sum(abs(d) for d in diffs)  # ties count as extreme
    if n <= max_exact:
        hits = 0
        for mask in range(2**n):
            total = sum(-d if mask >> i & 1 else d for i, d in enumerate(diffs))
            hits += abs(total) >= observed
        return hits / 2**n
    rng = random.Random(seed)
    hits = sum(abs(sum(d if rng.random() < 0.5 else -d for d in diffs)) >= observed for _ in range(resamples))
    return (hits + 1) / (resamples + 1)


def mean_ci(values: Sequence[float], *, level: float = 0.95, resamples: int = 4000, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean; seeded, so the same values give the same interval."""
    if not values:
        return math.nan, math.nan
    rng = random.Random(seed)
    means = sorted(sum(rng.choices(values, k=len(values))) / len(values) for _ in range(resamples))
    tail = (1 - level) / 2
    return quantile(means, tail), quantile(means, 1 - tail)
