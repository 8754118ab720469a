"""A/B verdicts for latency, compile time and memory between a baseline and a candidate torch (pure).

Evidence comes in pairs: each is a freshly started pair of worker processes (baseline and candidate)
measuring a check in interleaved rounds (ABBA order), so that the machine's drift cancels within a
round. A round gives d = ln((candidate + floor) / (baseline + floor)) of the two sides' medians
(floor: 0 for times; an absolute floor in bytes for memory, so 0 -> 0 is no change and a few KiB on a
tiny workload are not +25%).

**The process pair is the unit.** Offsets that belong to a process (allocator state, thread placement,
kernel choice, a process landing on a slow core) are constant within a pair and change between pairs,
so rounds of one pair are not independent evidence about the change. Each pair gives one estimate
m_i (the Hodges-Lehmann estimate of its rounds: robust to a stalled round) with its within-pair
variance w_i = s^2 / n_i (t_df / z)^2: s the SD of one round, pooled over the check's pairs (robust:
1.4826 MAD of each round's deviation from its pair's median), df its degrees of freedom (rounds less
pairs); the t/z factor keeps a few noisy rounds (a compile-time pair's) from looking certain. The test
is on the pair estimates:

- estimate M = mean of the m_i, reported as the ratio exp(M);
- variance of one pair's estimate, moderated (as limma does for few replicates): a prior of
  SD^2 + mean(w_i) worth DF pairs, updated by the check's own k pairs' sample variance:
  V = (DF (SD^2 + mean w) + (k - 1) s^2) / (DF + k - 1), with DF + k - 1 degrees of freedom; SE = sqrt(V / k).
  For the reported 95% interval, which "unchanged" must clear, SD is UNCHANGED_PAIR_SD (5%: what pairs of real
  workloads differ by here, 2.4-10.3% in the detector benchmark's A/A runs) worth UNCHANGED_PRIOR_DF (1) pair. This
  is the small-sample fallback too: one pair measures its own offset, not how far the next pair's lies from it, so
  a single pair can neither be "significant" on its rounds alone nor rule out a change as large as pairs differ by;
  from the second pair on the check's own spread outweighs the prior, so a workload whose processes differ by 10%
  (or a bimodal machine: a process now and then in a slow state) widens its own interval, and the one pair's worth
  at 5% keeps two or three pairs that happened to read alike from looking certain.
- a failure's interval is computed the same way with the prior worth FAIL_PRIOR_DF (3) pairs, and from MIN_PAIRS
  pairs on (where a regression can be called) with a prior SD of FAIL_PAIR_SD (5%, as above): a workload whose
  processes differ by 10% from one another (measured here) must not fail on four pairs that happened to read alike.
  One to three pairs at the end of a budget get PAIR_SD (2%): a 2x slowdown seen in one pair fails.
- intervals are Student's t on SE: [L, U] at `alpha / LOOKS` a side, where `alpha` is the run's
  false-alarm budget shared by its A/B checks (FAMILY_ALPHA / number of checks, Bonferroni; at most
  CHECK_ALPHA_MAX a check) and LOOKS
  the number of times a regression is tested (after pairs MIN_PAIRS..MAX_PAIRS, Bonferroni again):
  what a failure must clear; U95: the upper end of the ordinary 95% interval: what "unchanged" must
  clear (a miss costs less than a false alarm, so ruling a slowdown out needs no run-level correction).
- a pair *agrees* on a slowdown when its own estimate exceeds tau/2 (an exact series: tau).

With t the threshold (0.10 = 10% slower) and tau = ln(1 + t), states:
- `regression` (fails): at least MIN_PAIRS pairs, all of them but at most one agreeing, M and the median
  of the m_i beyond tau, and L > tau/2. An effect below half the threshold cannot fail at the run's
  confidence, one odd pair cannot carry a failure, and a process-level slow state must hit the
  candidate in MIN_PAIRS pairs running to fail (one process in four: 0.19^4, 0.13% a run).
- `improved`: the mirror image (informs, passes).
- `unchanged`: U95 < tau: a slowdown as large as the threshold is ruled out; the reason names the smallest one
  ruled out, exp(U95) - 1 (the words then say whether a smaller change was seen: `slower, within the 10%
  threshold`).
- `pending`: not settled: the caller measures another pair, sized by `rounds_for`, within its budget.
- `undecided`: still unsettled when the budget is spent; it says how many more pairs, and about how
  many seconds of measuring, deciding would take. The caller decides whether it fails (`--undecided`):
  by default it does when its estimate is beyond the threshold and significant at the run's confidence
  (L > tau/2: what a regression's interval must clear, only the agreement of MIN_PAIRS pairs missing),
  so that a 2x or 1.25x slowdown seen in two or three pairs fails, and a process that landed in a slow
  state in one pair of two (its plain 95% interval above 1, not its run-level one) does not.
Exact series (peak memory usually is: every round the same) are judged by their ratio, re-measured in
fresh pairs before they fail.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from torch_upgrade_check.analysis import stats
from torch_upgrade_check.model import ABState

FAMILY_ALPHA = 0.05  # the chance that a run with nothing changed reports any A/B change, at most
UNCHANGED_ALPHA = 0.025  # each side of the 95% interval reported, and that "unchanged" must clear
# A failure needs MIN_PAIRS fresh pairs, a check measures at most MAX_PAIRS: with fewer, processes that land in a slow
# state together failed plain A/As (docs/benchmarks.md#where-the-ab-constants-come-from).
MIN_PAIRS = 4
MAX_PAIRS = 8
LOOKS = MAX_PAIRS - MIN_PAIRS + 1  # a regression is tested after each pair from MIN_PAIRS to MAX_PAIRS
# prior SD of a pair's own offset in the log ratio where one to three pairs end a budget and a failure is asked of them
# (`undecided` beyond the threshold), and the floor of the standard error a pair's rounds are sized for (rounds_for):
# 2%, what benchmarks/noise.py measured between pairs, so that a 2x slowdown seen in one pair fails
# (docs/benchmarks.md#where-the-ab-constants-come-from).
PAIR_SD = 0.02
# What "unchanged" (the reported 95% interval) gives the prior: what real workloads' pairs differ by, worth 1 pair, so
# that a check's own pairs decide; with 2% worth 10, one pair that read a true change low settled it (issue 37;
# docs/benchmarks.md#replaying-the-recorded-pairs).
UNCHANGED_PAIR_SD = 0.05
UNCHANGED_PRIOR_DF = 1
# What a failure's interval (regression, improved, an undecided check that fails) gives the prior: its weight, worth
# only 3 pairs, so that a check's own pairs soon outweigh it; and a check's share of the run's budget is at most 1%
# (CHECK_ALPHA_MAX), however few checks the run has: worth 10 pairs with a one-check run's whole 5%, a plain A/A of the
# 20 ms workload failed 1 run in 20 (docs/benchmarks.md#where-the-ab-constants-come-from).
FAIL_PRIOR_DF = 3
# ... and that prior's SD is 5%, not 2%: what pairs of a real workload differ by; with 2%, four or five pairs that
# happened to read alike carried a failure (docs/benchmarks.md#replaying-the-recorded-pairs).
FAIL_PAIR_SD = 0.05
CHECK_ALPHA_MAX = 0.01
CONFIRM_LEAST = 4  # the fewest rounds of a confirmation pair (ABBA twice)


@dataclass(frozen=True)
class Batch:
    """One fresh worker pair's rounds: per round, each side's median (ms or bytes)."""

    baseline: tuple[float, ...]
    candidate: tuple[float, ...]
    exact: bool = False  # every sample on each side was the same value (peak memory usually is)
    seconds: float = 0.0  # measuring time its rounds took, both sides
    warm_seconds: float = 0.0  # its warm-up round, both sides (counted against the budget too)

    def log_ratios(self, floor: float = 0.0) -> list[float]:
        return [math.log((c + floor) / (b + floor)) for b, c in zip(self.baseline, self.candidate)
                if b + floor > 0 and c + floor > 0]

    def estimate(self, floor: float = 0.0) -> float:
        """This pair's estimate of the log ratio (nan when nothing could be compared)."""
        d = self.log_ratios(floor)
        return stats.hodges_lehmann(d) if d else math.nan


def round_sd(batches: Sequence[Batch], floor: float = 0.0) -> tuple[float, int]:
    """The SD of one round's log ratio within a pair, pooled over the pairs (each round's deviation from its own
    pair's median: the pairs' offsets do not count), and its degrees of freedom (rounds less pairs). Robust:
    1.4826 times the median absolute deviation, so a stalled round does not inflate it; the plain pooled SD
    where more than half the deviations are 0."""
    devs: list[float] = []
    pairs = 0
    for b in batches:
        d = b.log_ratios(floor)
        if b.exact or len(d) < 2:
            continue
        centre = stats.median(d)
        devs += [x - centre for x in d]
        pairs += 1
    df = len(devs) - pairs
    if df < 1:
        return 0.0, 0
    mad = 1.4826 * stats.median([abs(x) for x in devs])
    return (mad if mad > 0 else math.sqrt(sum(x * x for x in devs) / df)), df


@dataclass(frozen=True)
class PairLevel:
    """The pair estimates and the moderated variance of one (see the module docstring)."""

    estimates: tuple[float, ...]
    mean: float
    variance: float  # of one pair's estimate
    df: float
    exact: bool

    @property
    def se(self) -> float:
        return math.sqrt(self.variance / len(self.estimates)) if self.estimates else math.nan

    def bounds(self, alpha: float) -> tuple[float, float]:
        """The interval missing on each side with probability alpha."""
        if self.exact:
            return self.mean, self.mean
        half = stats.t_quantile(1 - alpha, self.df) * self.se
        return self.mean - half, self.mean + half

    def pairs_for(self, alpha: float, gap: float) -> int:
        """How many pairs in all would bring the interval's half-width at alpha under `gap`, each pair more adding a
        degree of freedom (a check of one pair, its prior worth one, is not judged at the t of 1 df forever)."""
        if self.exact or not gap > 0:
            return len(self.estimates) if self.exact else 10**6
        k = len(self.estimates)
        n = max(k, math.ceil(self.variance * (stats.normal_quantile(1 - alpha) / gap) ** 2))  # t > z: never fewer
        while n - k <= 100:  # beyond, the caller says no budget decides it
            if stats.t_quantile(1 - alpha, self.df + n - k) * math.sqrt(self.variance / n) <= gap:
                return n
            n += 1
        return n


def pair_level(batches: Sequence[Batch], floor: float = 0.0, prior_df: float | None = None,
               pair_sd: float | None = None) -> PairLevel:
    """The pair estimates and their moderated variance: by default the prior of the reported 95% interval
    (UNCHANGED_PAIR_SD worth UNCHANGED_PRIOR_DF pairs), read when called so that a replay can set them."""
    prior_df = UNCHANGED_PRIOR_DF if prior_df is None else prior_df
    pair_sd = UNCHANGED_PAIR_SD if pair_sd is None else pair_sd
    measured = [(b, b.estimate(floor)) for b in batches]
    measured = [(b, m) for b, m in measured if not math.isnan(m)]
    ests = tuple(m for _, m in measured)
    if not ests:
        return PairLevel((), math.nan, math.nan, math.nan, False)
    k, mean = len(ests), sum(ests) / len(ests)
    exact = all(b.exact for b in batches) and len(set(ests)) == 1
    # each pair's within variance: the pooled round SD over its rounds, widened by t/z for the rounds the SD
    # was estimated from (6 noisy compile rounds must not look as certain as 24)
    sd, df = round_sd([b for b, _ in measured], floor)
    # (at least 2 degrees of freedom: one ABBA cycle cut short by the budget would otherwise give a 40x variance)
    widen = (stats.t_quantile(0.975, max(2, df)) / stats.normal_quantile(0.975)) ** 2 if df else 1.0
    within = [0.0 if b.exact else sd * sd * widen / max(1, len(b.log_ratios(floor))) for b, _ in measured]
    prior = pair_sd**2 + sum(within) / k
    own = sum((m - mean) ** 2 for m in ests) / (k - 1) if k > 1 else 0.0
    variance = (prior_df * prior + (k - 1) * own) / (prior_df + k - 1)
    return PairLevel(ests, mean, variance, prior_df + k - 1, exact)


def run_alpha(checks: int) -> float:
    """Each A/B check's share of the run's false-alarm budget (Bonferroni over the run's checks), at most
    CHECK_ALPHA_MAX: a run of one or two checks is not given the whole 5% each."""
    return min(CHECK_ALPHA_MAX, FAMILY_ALPHA / max(1, checks))


@dataclass(frozen=True)
class Decision:
    state: ABState
    ratio: float
    ci_low: float
    ci_high: float
    p_value: float
    baseline_median: float
    candidate_median: float  # the baseline's median times the ratio (paired), not the candidate's own median
    rounds: int
    batches: int
    agreeing: int  # pairs that on their own show the change in the estimate's direction
    why: str  # one line: what the numbers say and what was (not) settled
    more_pairs: int = 0  # for undecided: about how many more fresh pairs would decide it (-1: none would)
    more_seconds: float = 0.0  # and about how many seconds of measuring they would take
    run_low: float = math.nan  # the interval at the run's false-alarm budget, which a failure must clear
    run_high: float = math.nan
    run_level: float = math.nan
    threshold: float = math.nan

    @property
    def confirmed(self) -> bool:
        return self.state in (ABState.REGRESSION, ABState.IMPROVED)

    @property
    def beyond(self) -> bool:
        """The point estimate is beyond the threshold and significant at the run's confidence: the run-level
        interval's lower end beyond half the threshold, as a regression's must be. What `--undecided fail` fails.
        Two noisy rounds at 1.29x in an A/A are not evidence, nor is one pair of two whose process landed in a
        slow state (the plain 95% interval, with no correction for the run's checks and looks, cleared 1 there:
        the detector benchmark's bimodal A/A); a 2x slowdown seen in one pair is."""
        return (math.isfinite(self.ratio) and self.ratio > 1 + self.threshold
                and math.isfinite(self.run_low) and self.run_low > math.sqrt(1 + self.threshold))

    @property
    def significant(self) -> bool:
        """The 95% interval leaves out "no change"."""
        return math.isfinite(self.ci_low) and (self.ci_low > 1 or self.ci_high < 1)

    def metrics(self) -> dict[str, float | str | int | bool]:
        return {"change": self.state, "ratio": self.ratio, "ci_low": self.ci_low, "ci_high": self.ci_high,
                "p_value": self.p_value, "baseline_median": self.baseline_median,
                "candidate_median": self.candidate_median, "rounds": self.rounds, "batches": self.batches,
                "agreeing_batches": self.agreeing, "confirmed": self.confirmed, "more_pairs": self.more_pairs,
                "more_seconds": round(self.more_seconds, 1), "significant": self.significant,
                "ci_level": 1 - 2 * UNCHANGED_ALPHA, "run_ci_low": self.run_low, "run_ci_high": self.run_high,
                "run_ci_level": self.run_level}


def decide(batches: Sequence[Batch], threshold: float, *, alpha: float, final: bool, floor: float = 0.0,
           increase: str = "slowdown") -> Decision:
    """The state after these pairs; `final` when no more can be measured (`pending` becomes `undecided`).

    `alpha`: this check's share of the run's false-alarm budget (`run_alpha`); it is divided by LOOKS here.
    `increase` names a change upwards in the reasons: "slowdown" for times, "growth" for memory.
    """
    tau = math.log1p(threshold)
    base = [x for b in batches for x in b.baseline]
    medians = (stats.median(base), stats.median([x for b in batches for x in b.candidate]))
    level = pair_level(batches, floor)
    if not level.estimates:
        return Decision(ABState.UNDECIDED if final else ABState.PENDING, math.nan, math.nan, math.nan, 1.0, *medians,
                        0, len(batches), 0, "no paired measurement could be compared", -1 if final else 0,
                        threshold=threshold)
    m, k = level.mean, len(level.estimates)
    # from MIN_PAIRS pairs on (where a regression can be called) their own spread is set against what pairs of a
    # real workload differ by (FAIL_PAIR_SD); one to three pairs at the budget's end keep the 2% of PAIR_SD
    fail_sd = FAIL_PAIR_SD if k >= MIN_PAIRS else PAIR_SD
    low, high = pair_level(batches, floor, prior_df=FAIL_PRIOR_DF, pair_sd=fail_sd).bounds(alpha / LOOKS)
    low95, high95 = level.bounds(UNCHANGED_ALPHA)
    up = sum(e > (tau if level.exact else tau / 2) for e in level.estimates)
    down = sum(e < -(tau if level.exact else tau / 2) for e in level.estimates)
    if level.exact or level.se == 0:
        p = 0.0 if m != 0 else 1.0
    else:
        p = 1 - stats.t_cdf(abs(m) / level.se, max(1, int(level.df)))
    # the candidate's figure is the baseline's median times the paired ratio: when the machine's speed
    # changes during a pair (it doubled here under load), each side's own median moves with it, and a
    # reviewer reading "4.5 ms -> 5.5 ms" beside "1.01x" would be misled; the raw samples are in the report
    shown = (medians[0], (medians[0] + floor) * math.exp(m) - floor)
    rounds = sum(len(b.log_ratios(floor)) for b in batches)
    common = (math.exp(m), math.exp(low95), math.exp(high95), p, *shown, rounds, len(batches))
    per_pair = stats.median(list(level.estimates))

    def done(state: ABState, agreeing: int, why: str, more: int = 0, seconds: float = 0.0) -> Decision:
        return Decision(state, *common, agreeing, why, more, seconds, run_low=math.exp(low), run_high=math.exp(high),
                        run_level=1 - 2 * alpha / LOOKS, threshold=threshold)

    needed = max(MIN_PAIRS, k - 1)
    if k >= MIN_PAIRS and m > tau and per_pair > tau and low > tau / 2 and up >= needed:
        return done(ABState.REGRESSION, up, f"confirmed in {up} of {k} fresh process pairs")
    if k >= MIN_PAIRS and m < -tau and per_pair < -tau and high < -tau / 2 and down >= needed:
        return done(ABState.IMPROVED, down, f"confirmed in {down} of {k} fresh process pairs")
    if m < -tau and high < -tau / 2 and not final:
        return done(ABState.PENDING, down, "an improvement to confirm in fresh process pairs")
    if high95 < tau:
        return done(ABState.UNCHANGED, up, ruled_out(high95, increase))
    if not final:
        return done(ABState.PENDING, up, "not settled yet")
    if m > tau:
        total = max(MIN_PAIRS, level.pairs_for(alpha / LOOKS, m - tau / 2))
        why = f"beyond the threshold in {up} of {k} fresh process pairs, not confirmed within the budget"
    else:
        total = level.pairs_for(UNCHANGED_ALPHA, tau - m)
        why = f"too noisy to rule out a {increase} of {threshold:.0%} within the budget"
    if total - k > 100:  # it sits on the threshold: no budget decides it
        return done(ABState.UNDECIDED, up, why, -1)
    more = max(1, total - k)
    per_pair_s = sum(b.seconds + b.warm_seconds for b in batches) / len(batches)
    return done(ABState.UNDECIDED, up, why, more, more * per_pair_s)


def ruled_out(high: float, increase: str) -> str:
    """What "unchanged" says it rules out: the smallest change, the 95% interval's upper end (a log ratio)."""
    if high <= 0:
        return f"any {increase} is ruled out"
    return f"a {increase} of more than {math.expm1(high):.1%} is ruled out"


def rounds_for(batches: Sequence[Batch], threshold: float, floor: float = 0.0, *, first: int = 24,
               least: int = CONFIRM_LEAST, most: int = 96) -> int:
    """Rounds for the next pair, sized from what the earlier ones measured (Kalibera & Jones): enough that
    the pair's own estimate is not blurred by round noise where it matters. The standard error aimed
    at is a third of the estimate's distance from the boundary it must clear (tau/2 for a slowdown
    beyond the threshold, tau otherwise), and never below PAIR_SD: below the pairs' own offsets more
    rounds buy nothing. A 2x slowdown's confirmation pairs are short; a change near the threshold gets
    many rounds. `first`: the first pair's."""
    if not batches:
        return first
    level = pair_level(batches, floor)
    if not level.estimates:
        return first
    if level.exact and all(b.exact for b in batches):
        return least
    tau = math.log1p(threshold)
    m = level.mean
    margin = (abs(m) - tau / 2) if abs(m) > tau else tau - abs(m)
    target = max(PAIR_SD, margin / 3)
    noise, _ = round_sd(batches, floor)
    rounds = math.ceil((noise / target) ** 2)
    rounds += rounds % 2  # whole ABBA cycles
    return max(least, min(most, rounds))
