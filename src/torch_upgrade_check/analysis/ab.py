"""A/B verdicts for latency and memory between a baseline and a candidate torch (pure).

A change is a `regression` only when it is both practically large (the candidate/baseline ratio of
medians beyond 1 + threshold, e.g. 10%) and statistically significant (Mann–Whitney U, p < ALPHA,
asv's rule); the orchestrator then measures one more batch of interleaved rounds, and the run fails
only when that batch on its own points the same way (beyond the threshold, p < CONFIRM_ALPHA) and
both batches together are still a regression. `suspicious`: beyond the threshold but not
significant, or too noisy to tell (the bootstrap interval of the ratio is wider than the threshold
on both sides); it warns and does not fail. `improved`: significant and beyond the threshold the
other way. Otherwise `unchanged`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from torch_upgrade_check.analysis import stats

ALPHA = 0.002
CONFIRM_ALPHA = 0.05


@dataclass(frozen=True)
class Change:
    state: str  # regression | suspicious | unchanged | improved
    ratio: float
    ci_low: float
    ci_high: float
    p_value: float
    baseline_median: float
    candidate_median: float

    def metrics(self) -> dict[str, float | str]:
        return {
            "change": self.state,
            "ratio": self.ratio,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "p_value": self.p_value,
            "baseline_median": self.baseline_median,
            "candidate_median": self.candidate_median,
        }


def classify(baseline: Sequence[float], candidate: Sequence[float], threshold: float) -> Change:
    ratio, low, high = stats.ratio_ci(baseline, candidate)
    p = stats.mann_whitney_u(baseline, candidate)
    b_med, c_med = stats.median(baseline), stats.median(candidate)
    if math.isnan(ratio):
        return Change("suspicious", ratio, low, high, p, b_med, c_med)
    if all(b == c for b, c in zip(sorted(baseline), sorted(candidate))) and len(baseline) == len(candidate):
        return Change("unchanged", ratio, low, high, p, b_med, c_med)
    if len(set(baseline)) == 1 and len(set(candidate)) == 1:
        # Exact measurements (peak memory usually is): the ratio needs no test.
        exact = "regression" if ratio > 1 + threshold else "improved" if ratio < 1 / (1 + threshold) else "unchanged"
        return Change(exact, ratio, ratio, ratio, p, b_med, c_med)
    significant = p < ALPHA
    if ratio > 1 + threshold:
        state = "regression" if significant and low > 1 else "suspicious"
    elif ratio < 1 / (1 + threshold):
        state = "improved" if significant and high < 1 else "unchanged"
    elif high - low > 2 * threshold:
        state = "suspicious"  # too noisy to rule a regression in or out
    else:
        state = "unchanged"
    return Change(state, ratio, low, high, p, b_med, c_med)


def confirms(baseline: Sequence[float], candidate: Sequence[float], threshold: float) -> bool:
    """A second, independent batch repeats the regression: beyond the threshold and p < CONFIRM_ALPHA."""
    ratio, _, _ = stats.ratio_ci(baseline, candidate)
    return ratio > 1 + threshold and stats.mann_whitney_u(baseline, candidate) < CONFIRM_ALPHA
