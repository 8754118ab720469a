"""A/B statistics and verdicts, and torch spec parsing: pure functions, no torch."""

from __future__ import annotations

import random

import pytest

from torch_upgrade_check.analysis import ab, stats
from torch_upgrade_check.errors import UsageError
from torch_upgrade_check.orchestrate import provision


def rounds(center: float, n: int = 12, spread: float = 0.05, seed: int = 0, drift: float = 0.0) -> list[list[float]]:
    """n rounds of 3 samples, with noise and, optionally, a machine speed that drifts between rounds."""
    rng = random.Random(seed)
    return [[center * (1 + drift * r) * (1 + rng.gauss(0, spread)) for _ in range(3)] for r in range(n)]


def test_sign_flip_p_is_exact_for_small_samples() -> None:
    assert stats.sign_flip_p([1.0] * 10) == pytest.approx(2 / 1024)  # all ten rounds agree
    assert stats.sign_flip_p([1.0, -1.0] * 5) == 1.0
    assert stats.sign_flip_p([]) == 1.0
    assert stats.sign_flip_p([0.0, 0.0]) == 1.0
    assert 0 < stats.sign_flip_p([0.1] * 20) < 0.001  # the seeded random version for larger n


def test_mean_ci_is_seeded_and_brackets_the_mean() -> None:
    values = [0.1, 0.2, 0.15, 0.12, 0.18, 0.11]
    low, high = stats.mean_ci(values)
    assert (low, high) == stats.mean_ci(values) and low < sum(values) / len(values) < high


@pytest.mark.parametrize(("candidate", "state"), [
    (rounds(1.5, seed=1), "regression"),
    (rounds(1.0, seed=1), "unchanged"),
    (rounds(0.5, seed=1), "improved"),
    (rounds(1.05, seed=1), "unchanged"),  # maybe significant, but under the 10% threshold
])
def test_classify(candidate: list[list[float]], state: str) -> None:
    assert ab.classify(rounds(1.0), candidate, 0.10).state == state


def test_pairing_cancels_drift_that_would_fool_an_unpaired_test() -> None:
    # the machine slows down 5% a round; both sides drift together, so nothing changed
    change = ab.classify(rounds(1.0, drift=0.05, seed=2), rounds(1.0, drift=0.05, seed=3), 0.10)
    assert change.state == "unchanged" and 0.95 < change.ratio < 1.05


def test_beyond_threshold_but_not_significant_is_suspicious() -> None:
    base = [[1.0], [1.0], [1.0], [1.0]]
    cand = [[1.5], [0.9], [1.6], [1.1]]
    change = ab.classify(base, cand, 0.10)
    assert change.ratio > 1.1 and change.p_value > ab.ALPHA and change.state == "suspicious"


def test_exact_measurements_need_no_test() -> None:
    assert ab.classify([[1000.0]] * 3, [[1300.0]] * 3, 0.20).state == "regression"
    assert ab.classify([[1000.0]] * 3, [[1100.0]] * 3, 0.20).state == "unchanged"
    assert ab.classify([[1000.0]] * 3, [[500.0]] * 3, 0.20).state == "improved"
    assert ab.confirms([[1000.0]] * 3, [[1300.0]] * 3, 0.20)


def test_confirmation_needs_the_second_batch_to_agree() -> None:
    assert ab.confirms(rounds(1.0, seed=3), rounds(1.5, seed=4), 0.10)
    assert not ab.confirms(rounds(1.0, seed=3), rounds(1.0, seed=4), 0.10)


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


def test_cross_version_is_planned_for_built_ins_and_for_workloads_that_ask() -> None:
    from pathlib import Path

    from torch_upgrade_check import suite
    from torch_upgrade_check.orchestrate import compare, session

    mine = suite.Workload("mine", ("float32",), ("numerics", "latency"), factory="pkg:make")
    asks = suite.Workload("asks", ("float32",), ("numerics", "cross-version"), factory="pkg:make2")
    mlp = next(w for w in suite.BUILTIN if w.name == "mlp")
    settings = session.Settings(out=Path("out"), workloads=(mlp, mine, asks))
    specs = compare.cross_version_specs(settings, "cpu", Path("store"), "save")
    assert [s.id for s in specs] == ["mlp[float32]/cross-version", "asks[float32]/cross-version"]
    assert all(s.params["mode"] == "save" for s in specs)
