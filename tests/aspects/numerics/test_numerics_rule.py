"""The numerics rule (aspects.numerics.judge, through verdicts.decide): the closeness rule on its typed metrics, read
by attribute; a tensor beyond rtol/atol passes within 4x the model's own rounding error and fails beyond it, naming
the tensor; nothing compared fails. Its breakages (sdpa-zero-grad, linear-grad-5pct) run in
test_numerics_breakage.py."""

from __future__ import annotations

from torch_upgrade_check.analysis.verdicts import decide
from torch_upgrade_check.aspects import part
from torch_upgrade_check.model import CheckSpec, Observation, Outcome

SPEC = CheckSpec(workload="mlp", aspect="numerics", device="cpu", dtype="float32")


def tensor(name: str, mismatched: int = 0, rmse: float = 1e-8, **more: float) -> dict:
    return {"name": name, "numel": 100, "scale": 1.0, "max_abs_err": rmse * 3, "mismatched": mismatched, "rmse": rmse,
            "nan": 0, **more}


def metrics(*tensors: dict) -> dict:
    return {"numel": 100 * len(tensors), "tensors": len(tensors), "max_abs_err": 3e-8, "max_rel_err": 1e-7,
            "mismatched_count": sum(t["mismatched"] for t in tensors), "per_tensor": list(tensors), "rtol": 1.3e-6,
            "atol": 1e-5, "not_checked": {}}


def test_every_tensor_within_tolerance_passes() -> None:
    r = decide(SPEC, Observation(SPEC.id, "ok", metrics(tensor("output"), tensor("grad:0.weight"))))
    assert r.outcome is Outcome.PASSED and r.reason.startswith("all 2 tensors are within tolerance"), r.reason
    assert r.thresholds == {"rtol": 1.3e-6, "atol": 1e-5, "atol_scaled_by": "each tensor's RMS", "multiplier": 2.0}


def test_a_tensor_beyond_the_models_own_rounding_error_fails_naming_it() -> None:
    own = tensor("grad:0.weight", mismatched=7, rmse=1e-5, model_rmse=1e-6)
    r = decide(SPEC, Observation(SPEC.id, "ok", metrics(tensor("output"), own)))
    assert r.outcome is Outcome.FAILED and "1 of 2 tensors differ; worst grad:0.weight" in r.reason, r.reason
    assert r.thresholds["model_multiplier"] == 4.0
    within = tensor("grad:0.weight", mismatched=7, rmse=3e-6, model_rmse=1e-6)
    assert decide(SPEC, Observation(SPEC.id, "ok", metrics(tensor("output"), within))).outcome is Outcome.PASSED


def test_nothing_compared_fails_and_the_metrics_are_read_by_attribute() -> None:
    r = decide(SPEC, Observation(SPEC.id, "ok", {**metrics(), "no_yardstick": "RuntimeError: no"}))
    assert r.outcome is Outcome.FAILED and r.reason.startswith("nothing was compared"), r.reason
    m = part("numerics", "judge").Metrics.from_dict({**metrics(tensor("output")), "sdpa_backend": "MATH", "new": 1})
    assert (m.tensors, m.sdpa_backend, m.rtol, m.per_tensor[0]["name"]) == (1, "MATH", 1.3e-6, "output")
    assert list(m.to_dict()) == [*metrics(tensor("output")), "sdpa_backend", "new"]
