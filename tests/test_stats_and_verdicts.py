"""Pass/fail rules of each aspect, from metrics the worker reports."""

from __future__ import annotations

import math

import pytest

from torch_upgrade_check.analysis import stats
from torch_upgrade_check.analysis.verdicts import decide, latency_limit
from torch_upgrade_check.model import CheckSpec, Observation, Outcome


def spec(aspect: str, dtype: str = "float32", workload: str = "mlp") -> CheckSpec:
    return CheckSpec(workload=workload, aspect=aspect, device="cpu", dtype=dtype)


def close(**kw: float) -> dict:
    base = {"numel": 100, "max_abs_err": 1e-7, "mismatched_count": 0, "mismatched_share": 0.0, "rmse": 1e-8,
            "rtol": 1.3e-6, "atol": 1e-5, "nan_count": 0}
    return {**base, **kw}


def test_quantiles_match_numpy_linear_interpolation() -> None:
    xs = [5.0, 1.0, 3.0, 2.0, 4.0]
    assert stats.median(xs) == 3.0
    assert stats.quantile(xs, 0.25) == 2.0
    assert stats.iqr([1.0, 2.0, 3.0, 4.0]) == pytest.approx(1.5)
    assert math.isnan(stats.median([]))


def test_numerics_passes_within_tolerance_and_fails_with_one_line_reason() -> None:
    ok = decide(spec("numerics"), Observation("x", "ok", close()))
    assert ok.outcome is Outcome.PASSED
    bad = decide(spec("numerics"), Observation("x", "ok", close(max_abs_err=3.1e-3, mismatched_count=4,
                                                                mismatched_share=0.04,
                                                                top_mismatches=[{"index": "output[0, 1]", "got": 1.0,
                                                                                 "expected": 1.0031, "abs_err": 3.1e-3}])))
    assert bad.outcome is Outcome.FAILED
    assert bad.reason == "max abs err 0.0031 > atol 1e-05 + rtol 1.3e-06·|ref| on 4% of elements (4 of 100)"
    assert "output[0, 1]" in bad.details
    assert bad.thresholds == {"rtol": 1.3e-6, "atol": 1e-5}


def test_nan_output_fails_numerics() -> None:
    r = decide(spec("numerics"), Observation("x", "ok", close(nan_count=8, mismatched_count=8, rmse=math.inf)))
    assert r.outcome is Outcome.FAILED and "NaN" in r.reason


def test_low_precision_is_judged_against_its_rounding_floor() -> None:
    m = close(mismatched_count=30, mismatched_share=0.3, rmse=3e-4, floor_rmse=1e-4, rtol=1.6e-2)
    assert decide(spec("numerics", "bfloat16"), Observation("x", "ok", m)).outcome is Outcome.PASSED
    m["rmse"] = 5e-4
    assert decide(spec("numerics", "bfloat16"), Observation("x", "ok", m)).outcome is Outcome.FAILED
    # float32 gets no such allowance
    assert decide(spec("numerics", "float32"), Observation("x", "ok", {**m, "rmse": 1e-9})).outcome is Outcome.FAILED


@pytest.mark.parametrize("aspect", ["compile", "cross-backend"])
def test_compile_and_cross_backend_use_the_reference_noise_floor(aspect: str) -> None:
    m = close(mismatched_count=5, mismatched_share=0.05, rmse=2.9e-6, ref_rmse=1e-6)  # bound: 2 x 1e-6 + atol/10
    assert decide(spec(aspect), Observation("x", "ok", m)).outcome is Outcome.PASSED
    r = decide(spec(aspect), Observation("x", "ok", {**m, "rmse": 3.5e-6}))
    assert r.outcome is Outcome.FAILED and r.thresholds["multiplier"] == 2.0


def test_determinism_requires_bitwise_equality() -> None:
    same = {"bitwise_equal": True, "differing_tensors": 0, "compared_tensors": 7, "max_abs_diff": 0.0}
    assert decide(spec("determinism"), Observation("x", "ok", same)).outcome is Outcome.PASSED
    diff = {**same, "bitwise_equal": False, "differing_tensors": 2, "max_abs_diff": 1e-9,
            "first_differing": ["grad:0.weight"]}
    r = decide(spec("determinism"), Observation("x", "ok", diff))
    assert r.outcome is Outcome.FAILED and "grad:0.weight" in r.reason


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
