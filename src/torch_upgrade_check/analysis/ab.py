"""A/B verdicts for latency and memory between a baseline and a candidate torch (pure).

Evidence comes in batches: each batch is a freshly started pair of worker processes (baseline and
candidate) measuring a check in interleaved rounds (ABBA order), so that the machine's drift cancels
within a round. A round gives d = ln((candidate + floor) / (baseline + floor)) of the two sides'
medians (floor: 0 for latency; an absolute floor in bytes for memory, so 0 -> 0 is no change and a
few KiB on a tiny workload are not +25%). Offsets that belong to a process (allocator state, thread
placement, kernel choice) are constant within a batch and change between batches, so a batch is
the unit that is really replicated, and a change must show in more than one of them.

With t the threshold (0.10 = 10% slower) and tau = ln(1 + t), over all rounds so far:
- M: the Hodges-Lehmann estimate of d (robust to a stalled round), reported as the ratio exp(M);
- [L, U]: its distribution-free interval, each side at `alpha`, the run's false-alarm budget shared
  by its A/B checks (FAMILY_ALPHA / number of checks, Bonferroni): what a failure must clear;
- U95: the upper end of the ordinary 95% interval: what "unchanged" must clear (a miss costs less
  than a false alarm, so ruling a slowdown out needs no run-level correction);
- a batch *agrees* on a slowdown when, on its own, its estimate exceeds tau/2 and the signed-rank
  test says slower at CONFIRM_ALPHA (an exact series: when its ratio exceeds the threshold).
States:
- `regression` (fails): at least MIN_PAIRS batches, all of them but at most one agreeing, the
  median of their own estimates and M beyond tau, and L > tau/2. A false failure needs the pooled
  interval and several independent process pairs to err together, and an odd pair cannot carry it;
  an effect below half the threshold cannot fail at the run's confidence.
- `improved`: the mirror image (informs, passes).
- `unchanged`: U95 < tau: a slowdown as large as the threshold is ruled out.
- `pending`: not settled: the caller measures another batch in a fresh pair, within its budget.
- `suspicious` (warns, fails nothing): still unsettled when the budget is spent; it says how many
  more rounds would settle it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from torch_upgrade_check.analysis import stats

FAMILY_ALPHA = 0.05  # the chance that a run with nothing changed reports any A/B change, at most
CONFIRM_ALPHA = 0.05  # each agreeing batch, on its own
UNCHANGED_ALPHA = 0.025  # each side of the 95% interval reported, and that "unchanged" must clear
MIN_PAIRS = 3  # measured on a noisy 2-core runner: with 2, a 5% slowdown failed 1.3% of checks; with 3, 0.3%


@dataclass(frozen=True)
class Batch:
    """One fresh worker pair's rounds: per round, each side's median (ms or bytes)."""

    baseline: tuple[float, ...]
    candidate: tuple[float, ...]
    exact: bool = False  # every sample on each side was the same value (peak memory usually is)
    seconds: float = 0.0  # measuring time it took, both sides

    def log_ratios(self, floor: float = 0.0) -> list[float]:
        return [math.log((c + floor) / (b + floor)) for b, c in zip(self.baseline, self.candidate)
                if b + floor > 0 and c + floor > 0]


@dataclass(frozen=True)
class Decision:
    state: str  # regression | improved | unchanged | suspicious | pending
    ratio: float
    ci_low: float
    ci_high: float
    p_value: float
    baseline_median: float
    candidate_median: float  # the baseline's median times the ratio (paired), not the candidate's own median
    rounds: int
    batches: int
    agreeing: int  # batches that on their own show the change in the estimate's direction
    why: str  # one line: what the numbers say and what was (not) settled
    more_rounds: int = 0  # for suspicious: about how many more rounds would settle it
    run_low: float = math.nan  # the interval at the run's false-alarm budget, which a failure must clear
    run_high: float = math.nan
    run_level: float = math.nan

    @property
    def confirmed(self) -> bool:
        return self.state in ("regression", "improved")

    def metrics(self) -> dict[str, float | str | int | bool]:
        return {"change": self.state, "ratio": self.ratio, "ci_low": self.ci_low, "ci_high": self.ci_high,
                "p_value": self.p_value, "baseline_median": self.baseline_median,
                "candidate_median": self.candidate_median, "rounds": self.rounds, "batches": self.batches,
                "agreeing_batches": self.agreeing, "confirmed": self.confirmed, "more_rounds": self.more_rounds,
                "ci_level": 1 - 2 * UNCHANGED_ALPHA, "run_ci_low": self.run_low, "run_ci_high": self.run_high,
                "run_ci_level": self.run_level}


def decide(batches: Sequence[Batch], threshold: float, *, alpha: float, final: bool, floor: float = 0.0,
           increase: str = "slowdown") -> Decision:
    """The state after these batches; `final` when no more can be measured (`pending` becomes a verdict).

    `increase` names a change upwards in the reasons: "slowdown" for latency, "growth" for memory.
    """
    tau = math.log1p(threshold)
    d = [x for b in batches for x in b.log_ratios(floor)]
    base = [x for b in batches for x in b.baseline]
    cand = [x for b in batches for x in b.candidate]
    medians = (stats.median(base), stats.median(cand))
    if not d:
        return Decision("suspicious" if final else "pending", math.nan, math.nan, math.nan, 1.0, *medians,
                        0, len(batches), 0, "no paired measurement could be compared")
    exact = all(b.exact for b in batches) and len(set(d)) == 1
    m = stats.hodges_lehmann(d)
    low, high = (m, m) if exact else stats.hl_interval(d, alpha)
    low95, high95 = (m, m) if exact else stats.hl_interval(d, UNCHANGED_ALPHA)
    up = [_agrees(b, floor, tau, "greater") for b in batches]
    down = [_agrees(b, floor, tau, "less") for b in batches]
    p = 0.0 if exact and m != 0 else stats.signed_rank_p(d, "greater" if m >= 0 else "less")
    # the candidate's figure is the baseline's median times the paired ratio: when the machine's speed
    # changes during a batch (it doubled here under load), each side's own median moves with it, and a
    # reviewer reading "4.5 ms -> 5.5 ms" beside "1.01x" would be misled; the raw samples are in the report
    shown = (medians[0], (medians[0] + floor) * math.exp(m) - floor)
    common = (math.exp(m), math.exp(low95), math.exp(high95), p, *shown, len(d), len(batches))
    n_up, n_down = sum(up), sum(down)

    def done(state: str, agreeing: int, why: str, more: int = 0) -> Decision:
        return Decision(state, *common, agreeing, why, more, run_low=math.exp(low), run_high=math.exp(high),
                        run_level=1 - 2 * alpha)

    pairs = len(batches)
    per_pair = stats.median([stats.hodges_lehmann(x) for x in (b.log_ratios(floor) for b in batches) if x])
    enough = pairs >= MIN_PAIRS
    if enough and m > tau and per_pair > tau and low > tau / 2 and n_up >= max(MIN_PAIRS, pairs - 1):
        return done("regression", n_up, f"confirmed in {n_up} of {pairs} fresh process pairs")
    if enough and m < -tau and per_pair < -tau and high < -tau / 2 and n_down >= max(MIN_PAIRS, pairs - 1):
        return done("improved", n_down, f"confirmed in {n_down} of {pairs} fresh process pairs")
    if m < -tau and high < -tau / 2 and not final:
        return done("pending", n_down, "an improvement to confirm in fresh process pairs")
    if high95 < tau:
        return done("unchanged", n_up, f"a {increase} of {threshold:.0%} or more is ruled out")
    if not final:
        return done("pending", n_up, "not settled yet")
    more = _rounds_to_settle(len(d), m, high95, tau) if m < tau else _rounds_to_settle(len(d), m, low, tau / 2)
    if m > tau:
        return done("suspicious", n_up, f"beyond the threshold in {n_up} of {pairs} fresh process pairs; a failure "
                                        f"needs {max(MIN_PAIRS, pairs - 1)} that agree", more)
    return done("suspicious", n_up, f"too noisy to rule out a {increase} of {threshold:.0%}", more)


def rounds_for(batches: Sequence[Batch], floor: float = 0.0, *, target_se: float = 0.015, least: int = 24,
               most: int = 96) -> int:
    """Rounds for the next batch, sized from the noise measured so far (Kalibera & Jones): enough for a
    standard error of `target_se` in the log ratio, between `least` and `most`."""
    d = [x for b in batches for x in b.log_ratios(floor)]
    if len(d) < 2:
        return least
    centre = stats.median(d)
    spread = 1.4826 * stats.median([abs(x - centre) for x in d])  # robust SD: a stalled round does not inflate it
    return max(least, min(most, math.ceil((spread / target_se) ** 2)))


def _agrees(batch: Batch, floor: float, tau: float, direction: str) -> bool:
    d = batch.log_ratios(floor)
    if not d:
        return False
    m = stats.hodges_lehmann(d)
    if batch.exact:
        return m > tau if direction == "greater" else m < -tau
    shifted = m > tau / 2 if direction == "greater" else m < -tau / 2
    return shifted and stats.signed_rank_p(d, direction) < CONFIRM_ALPHA


def _rounds_to_settle(n: int, m: float, bound: float, target: float) -> int:
    """About how many more rounds would move the interval's end `bound` past `target`, its half-width
    shrinking as 1/sqrt(rounds)."""
    half, gap = abs(bound - m), abs(m - target)
    if not (math.isfinite(half) and gap > 0):
        return 0
    return max(1, math.ceil(n * (half / gap) ** 2) - n)
