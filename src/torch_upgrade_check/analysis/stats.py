"""Summary statistics of timing samples (pure).

Quantiles use linear interpolation between order statistics (NumPy's default, "type 7"), so they
match what users get from numpy.percentile on the raw samples kept in report.json.
"""

from __future__ import annotations

import math
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
