"""A/B statistics and the sequential verdict over fresh process pairs (pure, no torch).

The simulations model what the detector benchmark measured on a noisy 2-core runner: per-round noise,
an offset that belongs to each process pair (the same within a batch, new in the next), and the
occasional stalled round. They are seeded, so each assertion is about a fixed sample.
"""

from __future__ import annotations

import math
import random

import pytest

from torch_upgrade_check.analysis import ab, stats
from torch_upgrade_check.analysis.verdicts import format_ms
from torch_upgrade_check.orchestrate.measure import explain

ALPHA = ab.FAMILY_ALPHA / 24  # a whole-suite run: 24 A/B checks share the budget


def test_signed_rank_p_is_exact() -> None:
    assert stats.signed_rank_p([1.0] * 10, "greater") == pytest.approx(2**-10)
    assert stats.signed_rank_p([-1.0] * 10, "greater") == pytest.approx(1.0)
    # ranks 1..5 with signs + - + + +: T+ = 13; of the 32 sign patterns, T+ >= 13 in 3 (13, 14, 15)
    assert stats.signed_rank_p([0.05, -0.1, 0.3, 0.4, 0.5], "greater") == pytest.approx(3 / 32)
    assert stats.signed_rank_p([], "greater") == 1.0 and stats.signed_rank_p([0.0, 0.0]) == 1.0


def test_hodges_lehmann_shrugs_off_a_stalled_round() -> None:
    rounds = [0.01, -0.02, 0.0, 0.015, -0.01, 0.005, 0.02, -0.015, 0.0, 0.01, -0.005, 0.6]  # one round stalled 1.8x
    assert abs(stats.hodges_lehmann(rounds)) < 0.02
    assert sum(rounds) / len(rounds) > 0.05  # what the mean of log ratios made of it


def test_hl_interval_covers_and_says_when_it_cannot() -> None:
    rng = random.Random(7)
    misses = sum(not (lo <= 0.2 <= hi) for lo, hi in
                 (stats.hl_interval([rng.gauss(0.2, 1) for _ in range(12)], 0.025) for _ in range(2000)))
    assert misses / 2000 <= 0.06
    assert stats.hl_interval([0.1, 0.2, 0.3], 0.01) == (-math.inf, math.inf)  # 3 rounds cannot reach 1%


def test_binomial_interval() -> None:
    low, high = stats.binomial_interval(0, 20)
    assert low == 0.0 and 0.15 < high < 0.17
    assert stats.binomial_interval(10, 20)[0] < 0.5 < stats.binomial_interval(10, 20)[1]


def batch(rng: random.Random, effect: float, *, rounds: int = 24, noise: float = 0.10, offset: float = 0.02,
          stall: float = 0.02, odd: float = 0.0) -> ab.Batch:
    """One fresh pair: a per-pair offset, per-round noise, now and then a stalled round on either side, and
    with probability `odd` a pair that is 20% off as a whole. The defaults are what benchmarks/noise.py
    measured here with both sides pinned to one CPU: round SD 6-16%, pair SD 1-5%."""
    shift = rng.gauss(0, offset) + (rng.choice((-0.2, 0.2)) if rng.random() < odd else 0.0)
    base, cand = [], []
    for _ in range(rounds):
        b = 1.0 * (1.5 if rng.random() < stall else 1.0)
        c = (1 + effect) * math.exp(shift + rng.gauss(0, noise)) * (1.5 if rng.random() < stall else 1.0)
        base.append(b)
        cand.append(c)
    return ab.Batch(tuple(base), tuple(cand), seconds=1.0)


def run(rng: random.Random, effect: float, threshold: float = 0.10, max_batches: int = 6, **noise: float) -> ab.Decision:
    """The sequential procedure of orchestrate.measure: a batch at a time until settled or out of batches."""
    batches: list[ab.Batch] = []
    for i in range(max_batches):
        batches.append(batch(rng, effect, rounds=ab.rounds_for(batches), **noise))
        decision = ab.decide(batches, threshold, alpha=ALPHA, final=i == max_batches - 1)
        if decision.state != "pending":
            return decision
    raise AssertionError("a final decision cannot be pending")


def outcomes(effect: float, n: int = 400, seed: int = 1, **noise: float) -> dict[str, int]:
    rng = random.Random(seed)
    tally: dict[str, int] = {}
    for _ in range(n):
        state = run(rng, effect, **noise).state
        tally[state] = tally.get(state, 0) + 1
    return tally


def test_no_change_never_fails_or_improves_and_rarely_warns() -> None:
    tally = outcomes(0.0, n=1000)
    assert tally.get("regression", 0) == 0 and tally.get("improved", 0) == 0
    assert tally.get("suspicious", 0) <= 2  # per check; a run of 24 checks warns in far fewer than 1 in 20


def test_odd_process_pairs_do_not_make_a_failure() -> None:
    """What fresh pairs are for: one pair in ten 20% off as a whole (allocator, placement) is outvoted."""
    tally = outcomes(0.0, n=1000, odd=0.1)
    assert tally.get("regression", 0) + tally.get("improved", 0) <= 3


def test_below_the_threshold_almost_never_fails() -> None:
    assert outcomes(0.05, n=600).get("regression", 0) <= 3  # at most 0.5% of checks, at a true 5%


@pytest.mark.parametrize("effect", [0.25, 0.50])
def test_large_slowdowns_always_fail(effect: float) -> None:
    assert outcomes(effect, n=200) == {"regression": 200}


def test_a_slowdown_at_the_threshold_fails_about_half_the_time() -> None:
    tally = outcomes(0.10, n=400)
    assert 0.4 <= tally.get("regression", 0) / 400 <= 0.7


def test_a_regression_needs_three_fresh_pairs() -> None:
    rng = random.Random(3)
    first = [batch(rng, 0.5), batch(rng, 0.5)]
    pending = ab.decide(first, 0.10, alpha=ALPHA, final=False)
    assert pending.state == "pending" and pending.ratio > 1.4
    out_of_budget = ab.decide(first, 0.10, alpha=ALPHA, final=True)
    assert out_of_budget.state == "suspicious" and "a failure needs 3 that agree" in out_of_budget.why
    confirmed = ab.decide([*first, batch(rng, 0.5)], 0.10, alpha=ALPHA, final=False)
    assert confirmed.state == "regression" and confirmed.agreeing == 3 and confirmed.batches == 3


def test_two_odd_pairs_among_four_do_not_fail() -> None:
    rng = random.Random(5)
    odd = ab.Batch((1.0,) * 24, (1.4,) * 12 + (1.45,) * 12)  # a pair 40% off, as the old single pair once was
    batches = [odd, batch(rng, 0.0), odd, batch(rng, 0.0)]
    assert ab.decide(batches, 0.10, alpha=ALPHA, final=True).state != "regression"


@pytest.mark.parametrize(("before", "after", "state"), [
    (0.0, 0.0, "unchanged"),  # 0 -> 0: nothing allocated on either side
    (65536.0, 65536.0, "unchanged"),
    (1000.0, 9000.0, "unchanged"),  # +8 KiB on a tiny workload: under the absolute floor
    (1 << 20, 1.3 * (1 << 20), "regression"),
    (0.0, 1 << 20, "regression"),  # nothing -> 1 MiB
    (1 << 20, 1 << 19, "improved"),
])
def test_exact_memory_series(before: float, after: float, state: str) -> None:
    exact = ab.Batch((before,) * 6, (after,) * 6, exact=True)
    first = ab.decide([exact], 0.20, alpha=ALPHA, final=False, floor=65536)
    if state == "unchanged":
        assert first.state == "unchanged" and not math.isnan(first.ratio)
        return
    assert first.state == "pending"  # even an exact change is re-measured in fresh pairs
    assert ab.decide([exact] * 3, 0.20, alpha=ALPHA, final=False, floor=65536).state == state


def test_too_noisy_to_settle_says_how_much_more_would() -> None:
    rng = random.Random(11)
    decision = None
    for _ in range(200):
        decision = run(rng, 0.03, max_batches=1, noise=0.25, offset=0.0, stall=0.0)
        if decision.state == "suspicious" and decision.ratio < 1.1:
            break
    assert decision is not None and decision.state == "suspicious"
    assert decision.more_rounds > 0 and "too noisy to rule out a slowdown of 10%" in decision.why
    assert f"about {decision.more_rounds} more rounds would settle it" in explain(decision, 0.10, format_ms, "latency")


def test_rounds_follow_the_noise() -> None:
    rng = random.Random(9)
    assert ab.rounds_for([]) == 24
    assert ab.rounds_for([batch(rng, 0.0, noise=0.02, stall=0.0)]) == 24
    assert ab.rounds_for([batch(rng, 0.0, noise=0.10, stall=0.0)]) > 24
    assert ab.rounds_for([batch(rng, 0.0, noise=0.5, stall=0.0)]) == 96


def test_explanation_is_one_line_a_reviewer_reads() -> None:
    d = ab.Decision("regression", 1.14, 1.09, 1.19, 1e-4, 10.0, 11.4, 72, 3, 3, "confirmed in 3 of 3 fresh process pairs")
    assert explain(d, 0.10, format_ms, "latency") == (
        "regression: latency 1.14× slower (95% CI 1.09–1.19), 10 ms → 11.4 ms; confirmed in 3 of 3 fresh process "
        "pairs; threshold 1.10×, 72 rounds in 3 process pairs")
