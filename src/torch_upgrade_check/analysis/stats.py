"""Statistics of timing samples and paired differences (pure, stdlib only).

Quantiles use linear interpolation between order statistics (NumPy's default, "type 7"), so they
match what users get from numpy.percentile on the raw samples kept in report.json.

Paired differences (one per interleaved round) are summarised robustly: the Hodges-Lehmann estimate
(the median of all pairwise means, "Walsh averages") with its distribution-free confidence interval
from the Wilcoxon signed-rank distribution, computed exactly up to EXACT_MAX differences. One stalled
round moves neither much (breakdown point 29%), where a mean of log ratios moves by 1/n of the stall.
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Callable, Sequence

EXACT_MAX = 80  # exact signed-rank distribution up to this many differences; normal approximation beyond


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


def walsh_averages(d: Sequence[float]) -> list[float]:
    """(d_i + d_j) / 2 for every i <= j, sorted."""
    return sorted((d[i] + d[j]) / 2 for i in range(len(d)) for j in range(i, len(d)))


def hodges_lehmann(d: Sequence[float]) -> float:
    """The Hodges-Lehmann estimate of the centre of paired differences: the median Walsh average."""
    return median(walsh_averages(d)) if d else math.nan


@functools.cache
def _signed_rank_counts(n: int) -> tuple[int, ...]:
    """counts[t] = how many of the 2**n sign assignments give rank sum T+ = t."""
    counts = [1]
    for rank in range(1, n + 1):
        grown = counts + [0] * rank
        for t, c in enumerate(counts):
            grown[t + rank] += c
        counts = grown
    return tuple(counts)


def _signed_rank_cdf(n: int, t: float) -> float:
    """P(T+ <= t) under the null hypothesis of a symmetric distribution centred on zero."""
    if t < 0:
        return 0.0
    if n <= EXACT_MAX:
        counts = _signed_rank_counts(n)
        return sum(counts[: math.floor(t) + 1]) / 2.0**n
    mean, sd = n * (n + 1) / 4, math.sqrt(n * (n + 1) * (2 * n + 1) / 24)
    return 0.5 * math.erfc(-(t + 0.5 - mean) / (sd * math.sqrt(2)))


def signed_rank_p(d: Sequence[float], alternative: str = "greater") -> float:
    """Wilcoxon signed-rank p-value that the differences are centred above (`greater`), below (`less`) or
    away from (`two-sided`) zero. Zeros are dropped; ties get mid-ranks. With n differences the
    smallest one-sided p is 2**-n."""
    nonzero = [x for x in d if x != 0]
    n = len(nonzero)
    if n == 0:
        return 1.0
    order = sorted(range(n), key=lambda i: abs(nonzero[i]))
    ranks = [0.0] * n
    i = 0
    while i < n:
        j = i
        while j + 1 < n and abs(nonzero[order[j + 1]]) == abs(nonzero[order[i]]):
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    t_plus = sum(r for r, x in zip(ranks, nonzero) if x > 0)
    greater = 1.0 - _signed_rank_cdf(n, math.ceil(t_plus) - 1)  # P(T+ >= t_plus)
    less = _signed_rank_cdf(n, math.floor(t_plus))  # P(T+ <= t_plus)
    if alternative == "greater":
        return min(1.0, greater)
    if alternative == "less":
        return min(1.0, less)
    if alternative != "two-sided":
        raise ValueError(f"alternative must be greater, less or two-sided, got {alternative!r}")
    return min(1.0, 2 * min(greater, less))


def hl_interval(d: Sequence[float], alpha: float) -> tuple[float, float]:
    """Distribution-free interval for the centre of the differences, missing on each side with prob. <= alpha.

    [W_(C), W_(N+1-C)] of the N sorted Walsh averages, C the largest count with P(T+ <= C - 1) <= alpha
    under the signed-rank null (coverage 1 - 2*alpha). Too few differences to reach alpha give
    (-inf, inf): nothing can be ruled out yet.
    """
    n = len(d)
    if n == 0:
        return math.nan, math.nan
    walsh = walsh_averages(d)
    low, high = 0, len(walsh)  # count = the number of t >= 0 with P(T+ <= t) <= alpha (the cdf rises with t)
    while low < high:
        mid = (low + high) // 2
        if _signed_rank_cdf(n, mid) <= alpha:
            low = mid + 1
        else:
            high = mid
    count = low
    if count == 0:
        return -math.inf, math.inf
    return walsh[count - 1], walsh[len(walsh) - count]


@functools.cache
def _rank_sum_counts(m: int, n: int) -> tuple[int, ...]:
    """counts[u] = how many of the C(m+n, m) equally likely orderings of two untied samples (m x's, n y's) give the
    Mann-Whitney count U = u of pairs with y above x. The largest value is a y (above all m x's: U gains m) or an x."""
    if m == 0 or n == 0:
        return (1,)
    counts = [0] * (m * n + 1)
    for u, c in enumerate(_rank_sum_counts(m, n - 1)):
        counts[u + m] += c
    for u, c in enumerate(_rank_sum_counts(m - 1, n)):
        counts[u] += c
    return tuple(counts)


def mann_whitney_p(x: Sequence[float], y: Sequence[float]) -> float:
    """Exact one-sided Mann-Whitney p-value that `y` lies above `x` (two independent samples, e.g. the per-process
    figures of each side): P(U >= observed) under exchangeability, a tie counted half and the observed U rounded
    down (conservative). With m and n values the smallest p is 1 / C(m+n, m): 0.05 at 3 and 3, 0.014 at 4 and 4."""
    if not x or not y:
        return 1.0
    u = sum(1.0 if b > a else 0.5 if b == a else 0.0 for a in x for b in y)
    counts = _rank_sum_counts(len(x), len(y))
    return sum(counts[math.floor(u + 1e-9):]) / sum(counts)


def shift_interval(x: Sequence[float], y: Sequence[float], alpha: float) -> tuple[float, float]:
    """Distribution-free interval for the shift of `y` over `x` (two independent samples), missing on each side with
    probability <= alpha: [D_(C), D_(mn+1-C)] of the m*n sorted differences y_j - x_i, C the largest count with
    P(U <= C - 1) <= alpha under the Mann-Whitney null (the two-sample counterpart of hl_interval). Too few values to
    reach alpha give (-inf, inf). Its centre, the median difference, is the two-sample Hodges-Lehmann estimate."""
    if not x or not y:
        return math.nan, math.nan
    diffs = sorted(b - a for a in x for b in y)
    counts = _rank_sum_counts(len(x), len(y))
    total, below, c = sum(counts), 0, 0
    while c < len(counts) and (below + counts[c]) / total <= alpha:
        below += counts[c]
        c += 1
    if c == 0:
        return -math.inf, math.inf
    return diffs[c - 1], diffs[len(diffs) - c]


def normal_quantile(p: float) -> float:
    """The standard normal quantile (Acklam's rational approximation, |error| < 1.2e-9)."""
    if not 0 < p < 1:
        raise ValueError(f"p must be in (0, 1), got {p}")
    a = (-3.969683028665376e01, 2.209460984245205e02, -2.759285104469687e02, 1.383577518672690e02,
         -3.066479806614716e01, 2.506628277459239e00)
    b = (-5.447609879822406e01, 1.615858368580409e02, -1.556989798598866e02, 6.680131188771972e01,
         -1.328068155288572e01)
    c = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e00, -2.549732539343734e00,
         4.374664141464968e00, 2.938163982698783e00)
    e = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e00, 3.754408661907416e00)
    if p < 0.02425:
        q = math.sqrt(-2 * math.log(p))
        return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / \
            ((((e[0] * q + e[1]) * q + e[2]) * q + e[3]) * q + 1)
    if p > 1 - 0.02425:
        return -normal_quantile(1 - p)
    q = p - 0.5
    r = q * q
    return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q / \
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1)


def t_cdf(t: float, df: int) -> float:
    """P(T <= t) for Student's t with a whole number of degrees of freedom: the closed forms of Abramowitz &
    Stegun 26.7.3-4 (finite sums in cos(theta), theta = atan(t / sqrt(df)))."""
    if df < 1:
        raise ValueError(f"df must be 1 or more, got {df}")
    theta = math.atan(abs(t) / math.sqrt(df))
    c2, s = math.cos(theta) ** 2, math.sin(theta)
    if df % 2:  # odd: (2/pi) (theta + sin cos (1 + 2/3 cos^2 + 2*4/(3*5) cos^4 + ...))
        term, total = 1.0, 1.0 if df > 1 else 0.0
        for k in range(1, (df - 1) // 2):
            term *= c2 * (2 * k) / (2 * k + 1)
            total += term
        inside = 2 / math.pi * (theta + s * math.cos(theta) * total)
    else:  # even: sin (1 + 1/2 cos^2 + 1*3/(2*4) cos^4 + ...)
        term, total = 1.0, 1.0
        for k in range(1, df // 2):
            term *= c2 * (2 * k - 1) / (2 * k)
            total += term
        inside = s * total
    return 0.5 + math.copysign(inside / 2, t)


@functools.lru_cache(maxsize=4096)
def t_quantile(p: float, df: int | float) -> float:
    """Student's t quantile (bisection on t_cdf); df = inf gives the normal quantile, a fractional df is
    rounded down (the wider interval)."""
    if not 0 < p < 1:
        raise ValueError(f"p must be in (0, 1), got {p}")
    if math.isinf(df) or df > 1000:
        return normal_quantile(p)
    whole = max(1, int(df))
    low, high = -1e6, 1e6
    for _ in range(200):
        mid = (low + high) / 2
        if t_cdf(mid, whole) < p:
            low = mid
        else:
            high = mid
        if high - low < 1e-10 * max(1.0, abs(mid)):
            break
    return (low + high) / 2


def exact_binomial_interval(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Clopper-Pearson interval for a proportion k/n: exact (coverage never below `level`), so "0 of 60" reads
    as an upper bound a reader can rely on (1 - (tail)^(1/n): 5.96% at 60). Each end is found by bisection
    on a binomial tail."""
    if n == 0:
        return 0.0, 1.0
    tail = (1 - level) / 2

    def at_most(j: int, p: float) -> float:  # P(X <= j) for X ~ Binomial(n, p), its terms in logs (no overflow)
        if p <= 0.0 or p >= 1.0:
            return 1.0 if p <= 0.0 or j >= n else 0.0
        lp, lq, lnf = math.log(p), math.log1p(-p), math.lgamma(n + 1)
        return min(1.0, sum(math.exp(lnf - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * lp + (n - i) * lq)
                            for i in range(j + 1)))

    def solve(rising: Callable[[float], float], target: float) -> float:  # rising(p) grows from p=0 to p=1
        lo, hi = 0.0, 1.0
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if rising(mid) < target else (lo, mid)
        return (lo + hi) / 2

    low = 0.0 if k == 0 else solve(lambda p: 1 - at_most(k - 1, p), tail)  # P(X >= k) = tail
    high = 1.0 if k == n else solve(lambda p: 1 - at_most(k, p), 1 - tail)  # P(X <= k) = tail
    return low, high


def sign_flip_p(diffs: Sequence[float], *, max_exact: int = 16, resamples: int = 20000, seed: int = 0) -> float:
    """Two-sided p-value that paired differences are centred on zero: a sign-flip permutation test.

    Kept for its exactness on tiny samples; the A/B verdicts use the signed-rank test, which ranks the
    differences and so is not carried by one outlying round.
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
