"""A/B verdicts for latency and memory between a baseline and a candidate torch (pure).

compare measures in interleaved rounds (ABBA order): each round gives one baseline and one candidate
median taken moments apart, so the machine's drift cancels within the pair. The unit of evidence is
the round: d = ln(candidate median / baseline median). The change is exp(mean d) with a 95% bootstrap
interval, and its significance a sign-flip permutation test on the d's (no distribution assumed;
samples inside a round are not independent, rounds are).

- `regression`: beyond 1 + threshold (e.g. 10%) and significant (p < ALPHA); the orchestrator then
  measures one more batch of rounds and fails the run only when that batch on its own reproduces the
  slowdown (candidate slower, p < CONFIRM_ALPHA) and all the rounds together are still a regression.
- `suspicious`: beyond the threshold but not significant, or so noisy that the interval reaches past
  twice the threshold: the orchestrator measures up to two more batches to settle it, and what
  stays suspicious is a warning, never a failure.
- `improved`: significant and beyond the threshold the other way. Otherwise `unchanged`.
Exact, repeatable measurements (peak memory usually is) need no test: the ratio decides.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from torch_upgrade_check.analysis import stats

ALPHA = 0.01
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
    rounds: int

    def metrics(self) -> dict[str, float | str]:
        return {
            "change": self.state,
            "ratio": self.ratio,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "p_value": self.p_value,
            "baseline_median": self.baseline_median,
            "candidate_median": self.candidate_median,
            "rounds": self.rounds,
        }


def _log_ratios(baseline: Sequence[Sequence[float]], candidate: Sequence[Sequence[float]]) -> list[float]:
    return [math.log(stats.median(c) / stats.median(b)) for b, c in zip(baseline, candidate)
            if b and c and stats.median(b) > 0 and stats.median(c) > 0]


def classify(baseline: Sequence[Sequence[float]], candidate: Sequence[Sequence[float]], threshold: float) -> Change:
    """`baseline[r]` and `candidate[r]` are the samples of round r on each side."""
    flat_b = [x for r in baseline for x in r]
    flat_c = [x for r in candidate for x in r]
    b_med, c_med = stats.median(flat_b), stats.median(flat_c)
    d = _log_ratios(baseline, candidate)
    if not d:
        return Change("suspicious", math.nan, math.nan, math.nan, 1.0, b_med, c_med, 0)
    ratio = math.exp(sum(d) / len(d))
    if len(set(flat_b)) == 1 and len(set(flat_c)) == 1:
        exact = "regression" if ratio > 1 + threshold else "improved" if ratio < 1 / (1 + threshold) else "unchanged"
        return Change(exact, ratio, ratio, ratio, 0.0 if ratio != 1 else 1.0, b_med, c_med, len(d))
    low, high = (math.exp(x) for x in stats.mean_ci(d))
    p = stats.sign_flip_p(d)
    significant = p < ALPHA
    if ratio > 1 + threshold:
        state = "regression" if significant and low > 1 else "suspicious"
    elif ratio < 1 / (1 + threshold):
        state = "improved" if significant and high < 1 else "unchanged"
    elif high > 1 + 2 * threshold:
        state = "suspicious"  # too noisy to rule out a large regression
    else:
        state = "unchanged"
    return Change(state, ratio, low, high, p, b_med, c_med, len(d))


def confirms(baseline: Sequence[Sequence[float]], candidate: Sequence[Sequence[float]], threshold: float) -> bool:
    """An independent batch reproduces the slowdown: candidate slower with p < CONFIRM_ALPHA.

    The threshold itself is judged on all rounds together (a batch alone is too short to pin a
    1.18x effect above 1.10); exact measurements must repeat beyond the threshold.
    """
    d = _log_ratios(baseline, candidate)
    if not d:
        return False
    flat_b = {x for r in baseline for x in r}
    flat_c = {x for r in candidate for x in r}
    ratio = math.exp(sum(d) / len(d))
    exact = len(flat_b) == 1 and len(flat_c) == 1
    if exact:
        return ratio > 1 + threshold
    return ratio > 1 and stats.sign_flip_p(d) < CONFIRM_ALPHA
