"""The cross-backend rule (aspects.cross_backend.judge, through verdicts.decide): the closeness rule with the CPU as
the reference; on MPS, a pass whose ops fell back to the CPU is skipped (not an MPS result), a failure still fails;
planned on the CPU it is skipped before it runs. Its emulated runs (CUDA, MPS) are tests/hardware's."""

from __future__ import annotations

from torch_upgrade_check.analysis.verdicts import decide
from torch_upgrade_check.model import CheckSpec, Observation, Outcome
from torch_upgrade_check.orchestrate.session import planned_skip

SPEC = CheckSpec(workload="mlp", aspect="cross-backend", device="mps", dtype="float32")


def metrics(rmse: float, ref_rmse: float, **more: object) -> dict:
    t = {"name": "output", "numel": 10, "scale": 1.0, "max_abs_err": rmse, "mismatched": 3, "rmse": rmse, "nan": 0,
         "ref_rmse": ref_rmse}
    return {"per_tensor": [t], "tensors": 1, "max_abs_err": rmse, "rtol": 1.3e-6, "atol": 1e-5, **more}


def test_within_twice_the_cpus_error_passes_and_beyond_it_fails() -> None:
    r = decide(SPEC, Observation(SPEC.id, "ok", metrics(2e-6, 1e-6)))
    assert r.outcome is Outcome.PASSED and "2× the CPU's" in r.reason, r.reason
    assert decide(SPEC, Observation(SPEC.id, "ok", metrics(5e-6, 1e-6))).outcome is Outcome.FAILED


def test_a_pass_with_ops_on_the_cpu_is_skipped_and_a_failure_still_fails() -> None:
    ops = {"mps_cpu_fallback_ops": ["aten::gelu"]}
    r = decide(SPEC, Observation(SPEC.id, "ok", metrics(2e-6, 1e-6, **ops)))
    assert r.outcome is Outcome.SKIPPED, r.reason
    assert r.reason.startswith("not an MPS result: ran on the CPU (PYTORCH_ENABLE_MPS_FALLBACK=1): aten::gelu, so the "
                               "comparison with the CPU is partly the CPU with itself"), r.reason
    failed = decide(SPEC, Observation(SPEC.id, "ok", metrics(5e-6, 1e-6, **ops)))
    assert failed.outcome is Outcome.FAILED and failed.reason.endswith("ran on the CPU (PYTORCH_ENABLE_MPS_FALLBACK=1): "
                                                                       "aten::gelu"), failed.reason
    numerics = CheckSpec(workload="mlp", aspect="numerics", device="mps", dtype="float32")
    assert decide(numerics, Observation(numerics.id, "ok", metrics(1e-8, 1e-8, **ops))).outcome is Outcome.PASSED


def test_planned_on_the_cpu_it_is_skipped_saying_why() -> None:
    cpu = CheckSpec(workload="mlp", aspect="cross-backend", device="cpu", dtype="float32")
    assert planned_skip(cpu, "cpu", {}) == "cross-backend compares an accelerator with the CPU, and --device cpu was asked"
    assert planned_skip(cpu, "auto", {"cuda": (False, "no CUDA")}) == "no accelerator to compare with the CPU (no CUDA)"
    assert planned_skip(CheckSpec("mlp", "numerics", "cpu", "float32"), "cpu", {}) == ""
