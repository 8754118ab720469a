"""Pass/fail rules of each aspect, from metrics the worker reports."""

from __future__ import annotations

import math

import pytest

from torch_upgrade_check.analysis import stats
from torch_upgrade_check.analysis.verdicts import decide, latency_limit
from torch_upgrade_check.model import CheckSpec, Observation, Outcome


def spec(aspect: str, dtype: str = "float32", workload: str = "mlp") -> CheckSpec:
    return CheckSpec(workload=workload, aspect=aspect, device="cpu", dtype=dtype)


def test_quantiles_match_numpy_linear_interpolation() -> None:
    xs = [5.0, 1.0, 3.0, 2.0, 4.0]
    assert stats.median(xs) == 3.0
    assert stats.quantile(xs, 0.25) == 2.0
    assert stats.iqr([1.0, 2.0, 3.0, 4.0]) == pytest.approx(1.5)
    assert math.isnan(stats.median([]))


def test_latency_limit_by_name_or_glob() -> None:
    samples = {"samples_ms": [10.0, 11.0, 12.0, 13.0, 50.0]}
    assert decide(spec("latency"), Observation("x", "ok", dict(samples))).outcome is Outcome.PASSED
    r = decide(spec("latency"), Observation("x", "ok", dict(samples)), max_latency_ms={"mlp": 11.5})
    assert r.outcome is Outcome.FAILED and r.metrics["median_ms"] == 12.0 and "limit 11.5 ms" in r.reason
    assert latency_limit(spec("latency"), {"mlp[float32]/*": 5}) == 5.0
    assert latency_limit(spec("latency", workload="cnn"), {"mlp": 5}) is None


@pytest.mark.parametrize(("status", "outcome"), [("skipped", Outcome.SKIPPED), ("exception", Outcome.ERROR),
                                                  ("crash", Outcome.ERROR), ("timeout", Outcome.ERROR)])
def test_non_measurements_map_to_outcomes(status: str, outcome: Outcome) -> None:
    r = decide(spec("numerics"), Observation("x", status, message="why", traceback="tail"))
    assert r.outcome is outcome and r.reason == "why"
