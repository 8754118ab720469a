"""A/B statistics and verdicts, and torch spec parsing: pure functions, no torch."""

from __future__ import annotations

import random

import pytest

from torch_upgrade_check.analysis import ab, stats
from torch_upgrade_check.errors import UsageError
from torch_upgrade_check.orchestrate import provision


def noisy(center: float, n: int = 30, spread: float = 0.02, seed: int = 0) -> list[float]:
    rng = random.Random(seed)
    return [center * (1 + rng.gauss(0, spread)) for _ in range(n)]


def test_mann_whitney_matches_the_textbook_value() -> None:
    # U = 0 for completely separated samples of 5; normal approximation with continuity: p ≈ 0.0122
    assert stats.mann_whitney_u([1, 2, 3, 4, 5], [6, 7, 8, 9, 10]) == pytest.approx(0.01219, abs=2e-4)
    assert stats.mann_whitney_u([1, 2, 3], [1, 2, 3]) == pytest.approx(1.0)
    assert stats.mann_whitney_u([], [1.0]) == 1.0
    assert stats.mann_whitney_u([2.0] * 5, [2.0] * 5) == 1.0  # every value tied


def test_ratio_ci_is_seeded_and_brackets_the_ratio() -> None:
    a, b = noisy(1.0), noisy(1.5, seed=1)
    first = stats.ratio_ci(a, b)
    assert first == stats.ratio_ci(a, b)
    ratio, low, high = first
    assert low < ratio < high and 1.4 < ratio < 1.6


@pytest.mark.parametrize(("candidate", "state"), [
    (noisy(1.5, seed=1), "regression"),
    (noisy(1.0, seed=1), "unchanged"),
    (noisy(0.5, seed=1), "improved"),
    (noisy(1.05, seed=1), "unchanged"),  # significant maybe, but under the 10% threshold
])
def test_classify(candidate: list[float], state: str) -> None:
    assert ab.classify(noisy(1.0), candidate, 0.10).state == state


def test_beyond_threshold_but_not_significant_is_suspicious() -> None:
    base = [1.0, 2.0, 1.0, 2.0, 1.0, 2.0]
    cand = [1.2, 2.4, 1.1, 2.6, 1.3, 2.2]
    change = ab.classify(base, cand, 0.10)
    assert change.ratio > 1.1 and change.state == "suspicious"


def test_exact_measurements_need_no_test() -> None:
    assert ab.classify([1000.0] * 3, [1300.0] * 3, 0.20).state == "regression"
    assert ab.classify([1000.0] * 3, [1100.0] * 3, 0.20).state == "unchanged"
    assert ab.classify([1000.0] * 3, [500.0] * 3, 0.20).state == "improved"


def test_confirmation_needs_the_second_batch_to_agree() -> None:
    assert ab.confirms(noisy(1.0, seed=3), noisy(1.5, seed=4), 0.10)
    assert not ab.confirms(noisy(1.0, seed=3), noisy(1.0, seed=4), 0.10)


@pytest.mark.parametrize(("text", "kind", "requirement"), [
    ("2.13.0", "version", "torch==2.13.0"),
    ("2.14.0.dev20261120", "version", "torch==2.14.0.dev20261120"),
    (">=2.12,<2.14", "range", "torch>=2.12,<2.14"),
    ("nightly", "nightly", "torch"),
    ("test", "test", "torch"),
    ("current", "current", ""),
])
def test_specs(text: str, kind: str, requirement: str) -> None:
    spec = provision.parse_spec(text, "--candidate")
    assert (spec.kind, spec.requirement) == (kind, requirement)


@pytest.mark.parametrize("text", ["banana", "2.13.0; rm -rf /", "torch==2.13", ""])
def test_bad_specs_name_the_flag_and_the_forms(text: str) -> None:
    with pytest.raises(UsageError, match=r"--candidate must be a torch version like 2\.13\.0"):
        provision.parse_spec(text, "--candidate")


def test_backends_and_indexes() -> None:
    assert provision.check_backend("cu128") == "cu128"
    with pytest.raises(UsageError, match=r"--torch-backend must be"):
        provision.check_backend("cuda12")
    release = provision.parse_spec("2.13.0", "x")
    nightly = provision.parse_spec("nightly", "x")
    assert provision.index_for("auto", release, None) == ""  # the installer's configured index
    assert provision.index_for("auto", release, (12, 9)) == "https://download.pytorch.org/whl/cu128"
    assert provision.index_for("auto", release, (13, 1)) == "https://download.pytorch.org/whl/cu130"
    assert provision.index_for("auto", nightly, None) == "https://download.pytorch.org/whl/nightly/cpu"
    assert provision.index_for("cpu", release, (12, 9)) == "https://download.pytorch.org/whl/cpu"
    assert provision.index_for("pypi", release, (12, 9)) == ""


def test_environment_names_follow_their_contents() -> None:
    base = dict(python_version="3.11.7", requirement="torch==2.13.0", backend="auto", index_url="",
                extra_index_urls=(), find_links=(), pre=False, extra_requirements=(), installer="pip")
    a, b = provision.InstallPlan(**base), provision.InstallPlan(**{**base, "extra_requirements": ("numpy",)})
    assert a.key() == provision.InstallPlan(**base).key() and a.key() != b.key()
