"""docs/ab-method.md and measure's docstring state the A/B planner's figures as the code has them: the first pair's
share of the budget and the number of looks a regression gets (issue 37, item 11: they said a third and four, from
when a failure needed 3 pairs; the code gives a quarter and five)."""

from __future__ import annotations

from conftest import ROOT

from torch_upgrade_check.analysis import ab
from torch_upgrade_check.model import CheckSpec
from torch_upgrade_check.orchestrate import measure

SHARE = {2: "half", 3: "a third", 4: "a quarter", 5: "a fifth", 6: "a sixth"}
COUNT = {3: "three", 4: "four", 5: "five", 6: "six", 7: "seven"}


def _flat(text: str) -> str:
    return " ".join(text.split())


def first_pair_share() -> str:
    """What the planner gives a check's first pair (no pair measured yet), as a word."""
    track = measure.Track(CheckSpec("w", "latency", "cpu", "float32"), 0.10, budget_s=20.0)
    return SHARE[round(track.budget / track.pair_cap())]


def test_the_ab_method_says_the_first_pairs_share_of_the_budget_and_the_looks() -> None:
    method = _flat((ROOT / "docs" / "ab-method.md").read_text())
    assert f"The first pair has 24 rounds (compile time: 6; memory: 3) but at most {first_pair_share()} of the " \
           "budget" in method
    assert f"by the {COUNT[ab.LOOKS]} times a regression is tested (after pairs {ab.MIN_PAIRS} to {ab.MAX_PAIRS})" \
           in method


def test_measures_docstring_says_the_first_pairs_share() -> None:
    assert f"the first pair gets {first_pair_share()} of the budget" in _flat(measure.__doc__ or "")
