"""Closeness to the fp64 golden, tensor by tensor: the rule every correctness aspect uses (pure, no torch)."""

from __future__ import annotations

import math

import pytest

from torch_upgrade_check.analysis.verdicts import decide
from torch_upgrade_check.model import CheckSpec, Observation, Outcome


def spec(aspect: str, dtype: str = "float32") -> CheckSpec:
    return CheckSpec(workload="mlp", aspect=aspect, device="cpu", dtype=dtype)


def tensor(name: str, **kw: float) -> dict:
    return {"name": name, "numel": 100, "scale": 1.0, "max_abs_err": 1e-7, "mismatched": 0, "rmse": 1e-8, "nan": 0, **kw}


def metrics(*tensors: dict, **kw: object) -> dict:
    return {"rtol": 1.3e-6, "atol": 1e-5, "per_tensor": list(tensors), "max_abs_err": 1e-7, **kw}


def judge(aspect: str, m: dict, dtype: str = "float32") -> tuple[Outcome, str]:
    r = decide(spec(aspect, dtype), Observation("x", "ok", m))
    return r.outcome, r.reason


def test_every_tensor_within_tolerance_passes() -> None:
    outcome, reason = judge("numerics", metrics(tensor("output"), tensor("grad:0.weight", scale=1e-4)))
    assert outcome is Outcome.PASSED and reason.startswith("all 2 tensors are within tolerance")


def test_one_wrong_gradient_fails_however_large_the_outputs() -> None:
    # a large, exact output no longer hides a small wrong gradient: each tensor is judged alone
    m = metrics(tensor("output", numel=100000, scale=50.0),
                tensor("grad:input0", scale=3e-5, mismatched=16128, numel=16384, rmse=3e-5, max_abs_err=1e-4))
    outcome, reason = judge("numerics", m)
    assert outcome is Outcome.FAILED
    assert "1 of 2 tensors differ" in reason and "grad:input0" in reason and "16128 of 16384" in reason


@pytest.mark.parametrize(("rmse", "outcome"), [(3.9e-4, Outcome.PASSED), (4.5e-4, Outcome.FAILED)])
def test_low_precision_is_judged_against_its_rounding_floor_per_tensor(rmse: float, outcome: Outcome) -> None:
    m = metrics(tensor("output", mismatched=30, rmse=rmse, floor_rmse=1e-4), rtol=1.6e-2)  # bound 4e-4 + 1e-6
    assert judge("numerics", m, "bfloat16")[0] is outcome


def test_a_zero_gradient_in_bfloat16_fails_even_when_outputs_are_exact() -> None:
    """What the old pooled RMSE let pass: SDPA's backward returning zeros, with exact outputs."""
    m = metrics(tensor("output", mismatched=700, rmse=6.6e-4, floor_rmse=5.6e-4),
                tensor("grad:input0", scale=0.25, mismatched=16128, rmse=0.25, floor_rmse=4.2e-4), rtol=1.6e-2)
    outcome, reason = judge("numerics", m, "bfloat16")
    assert outcome is Outcome.FAILED and "grad:input0: rmse 0.25 > 4× bfloat16 rounding error" in reason


def test_float32_has_no_rounding_allowance() -> None:
    m = metrics(tensor("output", mismatched=3, rmse=1e-9, floor_rmse=1e-8))
    assert judge("numerics", m)[0] is Outcome.FAILED


@pytest.mark.parametrize(("rmse", "outcome"), [(3.9e-9, Outcome.PASSED), (4.5e-9, Outcome.FAILED)])
def test_float32_elements_outside_tolerance_pass_within_the_models_own_rounding_error(rmse: float,
                                                                                     outcome: Outcome) -> None:
    """vit_tiny's fp32 accumulation over 12 blocks: 1 of 147,456 gradient elements a little outside rtol/atol, its
    RMSE well within 4x what the golden recomputed with float32's rounding simulated is from the golden."""
    m = metrics(tensor("grad:blocks.11.mlp.fc1.weight", numel=147456, mismatched=1, rmse=rmse, max_abs_err=5.96e-7,
                       scale=0.0575, model_rmse=1e-9), atol=1e-8)  # bound 4e-9 + atol*scale/10 (about 6e-11)
    outcome_got, reason = judge("numerics", m)
    assert outcome_got is outcome
    assert f"rmse {rmse:.3g} {'≤' if outcome is Outcome.PASSED else '>'} 4× the model's own float32 rounding error 1e-09" \
        in reason
    assert decide(spec("numerics"), Observation("x", "ok", m)).thresholds["model_multiplier"] == 4.0


def test_a_yardstick_that_could_not_be_computed_is_said_and_rtol_atol_stand_alone() -> None:
    m = metrics(tensor("output", mismatched=3, rmse=1e-9), no_yardstick="RuntimeError: torch.compile with fullgraph")
    outcome, reason = judge("numerics", m)
    assert outcome is Outcome.FAILED
    assert "the model's own rounding error could not be computed (RuntimeError: torch.compile with fullgraph)" in reason


@pytest.mark.parametrize("aspect", ["compile", "cross-backend", "cross-version"])
def test_reference_aspects_use_the_references_noise_floor(aspect: str) -> None:
    m = metrics(tensor("output", mismatched=5, rmse=2.9e-6, ref_rmse=1e-6))  # bound: 2 x 1e-6 + atol*scale/10
    assert judge(aspect, m)[0] is Outcome.PASSED
    outcome, reason = judge(aspect, metrics(tensor("output", mismatched=5, rmse=3.5e-6, ref_rmse=1e-6)))
    assert outcome is Outcome.FAILED and "2× " in reason


def test_a_tensor_the_reference_lacks_is_judged_as_numerics() -> None:
    """cross-backend on CUDA: the CPU has no FlexAttention backward, so gradients meet the golden alone."""
    m = metrics(tensor("output", ref_rmse=1e-6), tensor("grad:input0", mismatched=4, rmse=1e-6),
                no_reference={"gradients": "judged against the fp64 golden alone: the CPU has none"})
    outcome, reason = judge("cross-backend", m)
    assert outcome is Outcome.FAILED and "grad:input0: 4 of 100 elements" in reason
    passing = metrics(tensor("output", ref_rmse=1e-6), tensor("grad:input0"),
                      no_reference={"gradients": "judged against the fp64 golden alone: the CPU has none"})
    outcome, reason = judge("cross-backend", passing)
    assert outcome is Outcome.PASSED and "gradients judged against the fp64 golden alone" in reason


def test_zero_tolerances_ask_for_bitwise_equality() -> None:
    m = metrics(tensor("output", mismatched=1, rmse=1e-12, ref_rmse=1e-6), rtol=0.0, atol=0.0)
    outcome, reason = judge("compile", m)
    assert outcome is Outcome.FAILED and "bitwise" in reason


def test_zero_tolerances_pass_what_equals_its_reference_bitwise() -> None:
    # the same torch on both sides: float32 differs from the fp64 golden, but not from the baseline's output
    same = metrics(tensor("output", mismatched=512, rmse=2e-8, ref_rmse=2e-8, ref_equal=True),
                   tensor("grad:w", mismatched=64, rmse=7e-8, ref_rmse=7e-8, ref_equal=True), rtol=0.0, atol=0.0)
    outcome, reason = judge("cross-version", same)
    assert outcome is Outcome.PASSED, reason
    one_bit = metrics(tensor("output", mismatched=512, rmse=2e-8, ref_rmse=2e-8, ref_equal=True),
                      tensor("grad:w", mismatched=64, rmse=7e-8, ref_rmse=7.1e-8, ref_equal=False), rtol=0.0, atol=0.0)
    outcome, reason = judge("cross-version", one_bit)
    assert outcome is Outcome.FAILED and "grad:w" in reason and "bitwise" in reason
    # numerics in float32 has no reference: bitwise against the fp64 golden, which float32 never meets
    outcome, _ = judge("numerics", metrics(tensor("output", mismatched=512, rmse=2e-8), rtol=0.0, atol=0.0))
    assert outcome is Outcome.FAILED


def test_nan_fails() -> None:
    outcome, reason = judge("numerics", metrics(tensor("output", nan=8, mismatched=8, rmse=math.inf)))
    assert outcome is Outcome.FAILED and "8 NaN" in reason


def test_a_tensor_produced_and_not_compared_never_passes_silently() -> None:
    outcome, reason = judge("numerics", metrics(tensor("output"), uncompared=["grad:input0", "grad:input1"]))
    assert outcome is Outcome.FAILED and "2 tensors were produced but not compared" in reason


def test_nothing_compared_fails() -> None:
    assert judge("numerics", metrics())[0] is Outcome.FAILED


def test_gradients_not_checked_say_why() -> None:
    m = metrics(tensor("output"), not_checked={"gradients": "FlexAttention forward and backward does not run on mps"})
    outcome, reason = judge("numerics", m)
    assert outcome is Outcome.PASSED and reason.endswith("gradients not checked: FlexAttention forward and backward "
                                                         "does not run on mps")


def test_compile_that_compiled_nothing_fails() -> None:
    m = metrics(tensor("output"), graphs_compiled=0, dynamo_fallbacks=["Dynamo recompile limit exceeded"])
    outcome, reason = judge("compile", m)
    assert outcome is Outcome.FAILED and "compiled no graph" in reason and "recompile limit" in reason
    assert judge("compile", metrics(tensor("output"), graphs_compiled=1))[0] is Outcome.PASSED


def test_the_worker_says_bitwise_equal_only_for_the_same_bits(torch_python: str) -> None:
    # ref_equal feeds the rtol = atol = 0 rule: one ulp, a sign of zero or another dtype is not "equal"
    import torch

    from torch_upgrade_check.worker.tensors import compare

    base = torch.tensor([1.0, 0.0, -2.5])
    one_ulp = base.clone()
    one_ulp[0] = torch.nextafter(one_ulp[0], torch.tensor(2.0))
    negative_zero = torch.tensor([1.0, -0.0, -2.5])
    golden = {"output": base.double()}
    for result, equal in ((base.clone(), True), (one_ulp, False), (negative_zero, False), (base.bfloat16(), False)):
        m = compare({"output": result}, golden, reference={"output": base}, rtol=0.0, atol=0.0)
        assert m["per_tensor"][0]["ref_equal"] is equal, (result, m["per_tensor"][0])


def test_a_changed_fp64_golden_fails_cross_version_even_where_every_output_is_close() -> None:
    """Issue 20: the candidate's fp64 golden against the baseline's is a finding of its own; equal, it passes."""
    changed = {"rtol": 1e-7, "atol": 1e-7, "numel": 200, "mismatched_count": 150, "max_abs_err": 5e-3,
               "max_rel_err": 1e-3, "worst": "output", "bitwise_equal": False}
    outcome, reason = judge("cross-version", metrics(tensor("output"), fp64_vs_baseline=changed))
    assert outcome is Outcome.FAILED and reason.startswith("the fp64 golden itself changed: 150 of 200 elements")
    same = {**changed, "mismatched_count": 0, "max_abs_err": 0.0, "bitwise_equal": True}
    outcome, reason = judge("cross-version", metrics(tensor("output"), fp64_vs_baseline=same))
    assert outcome is Outcome.PASSED, reason
    outcome, _ = judge("numerics", metrics(tensor("output"), fp64_vs_baseline=changed))  # cross-version's rule alone
    assert outcome is Outcome.PASSED


def test_a_changed_random_stream_is_said_first_where_a_resumed_step_or_a_curve_fails() -> None:
    changed = {"op": "aten.multinomial.default", "call": 3, "of": 9,
               "how": "aten.multinomial.default draws different numbers for the same seed"}
    resumed = {"mode": "compare", "loaded": True, "mismatched_count": 12, "max_abs_err": 0.1, "rtol": 1.3e-6,
               "atol": 1e-5, "first_differing": ["loss"], "baseline_torch": "2.6.0"}
    outcome, reason = judge("checkpoint", {**resumed, "random_stream_changed": changed})
    assert outcome is Outcome.FAILED and reason.startswith(
        "the random stream changed, not the numerics: aten.multinomial.default draws different numbers for the same "
        "seed (draw 3 of 9); so the step resumed from baseline 2.6.0's checkpoint differs"), reason
    outcome, reason = judge("checkpoint", resumed)
    assert outcome is Outcome.FAILED and reason.startswith("the step resumed from"), reason
