"""The distributed rule (aspects.fsdp2.judge, through verdicts.decide), fsdp2's and ddp's: under torchrun every rank
exited 0 and shut down within the bound, the steps against the unsharded model by fsdp2's tolerances, and in compare
against the baseline's steps by the cross-version rule."""

from __future__ import annotations

import pytest

from torch_upgrade_check.analysis.verdicts import decide
from torch_upgrade_check.model import CheckSpec, Observation, Outcome


def spec(aspect: str, dtype: str = "float32") -> CheckSpec:
    return CheckSpec(workload="transformer_block", aspect=aspect, device="cpu", dtype=dtype)


def tensor(name: str, **kw: float) -> dict:
    return {"name": name, "numel": 100, "scale": 1.0, "max_abs_err": 1e-7, "mismatched": 0, "rmse": 1e-8, "nan": 0, **kw}


def judge(aspect: str, m: dict, dtype: str = "float32") -> tuple[Outcome, str]:
    r = decide(spec(aspect, dtype), Observation("x", "ok", m))
    return r.outcome, r.reason


# what worker/torchrun.py adds to a clean fsdp2 or ddp result
TORCHRUN_OK = {"launcher": "torchrun --standalone", "torchrun_exit": 0, "hung_ranks": [], "left_running": [],
               "shutdown_timeout_s": 20, "shutdown_s": [0.01, 0.02], "rank_peak_host_bytes": [300 * 2**20, 301 * 2**20]}


def test_fsdp2_fails_a_reduced_gradient_off_beyond_its_stated_tolerance_even_where_the_parameters_match() -> None:
    base = {**TORCHRUN_OK, "max_abs_err": 5e-7, "max_rel_err": 4.6, "world_size": 2, "backend": "gloo", "steps": 3,
            "worst_grad": "self_attn.in_proj_weight", "worst_grad_step": 3, "worst_grad_rank": 1,
            "grad_shards_compared": 72, "grad_shards_unmatched": 0, "max_loss_err": 2e-9, "max_loss_rel_err": 1e-7}
    outcome, reason = judge("fsdp2", {**base, "max_grad_err": 7e-3})
    assert outcome is Outcome.FAILED and reason.startswith("the reduced gradients differ from the unsharded model's")
    outcome, reason = judge("fsdp2", {**base, "max_grad_err": 3e-6})
    assert outcome is Outcome.PASSED and "at most 0.0001" in reason, reason
    outcome, reason = judge("fsdp2", {**base, "grad_shards_compared": 0})  # nothing compared never passes
    assert outcome is Outcome.FAILED and "no reduced gradient shard was compared" in reason


def test_fsdp2_fails_a_shard_it_could_not_compare_a_wrong_loss_and_a_nan() -> None:
    """Issue 37: shards of another shape were skipped silently, the loss never judged, and NaN read as no error."""
    base = {**TORCHRUN_OK, "max_abs_err": 5e-7, "max_rel_err": 4.6, "world_size": 2, "backend": "gloo", "steps": 3,
            "worst_grad": "norm1.weight", "worst_grad_step": 3, "worst_grad_rank": 1, "grad_shards_compared": 48,
            "max_grad_err": 3e-6, "grad_shards_unmatched": 0, "max_loss_err": 2e-9, "max_loss_rel_err": 1e-7,
            "worst_loss_step": 2}
    assert judge("fsdp2", base)[0] is Outcome.PASSED
    outcome, reason = judge("fsdp2", {**base, "grad_shards_unmatched": 24, "unmatched_grad": "linear1.weight"})
    assert outcome is Outcome.FAILED and reason.startswith(
        "24 reduced gradient shards on 2 ranks (gloo) could not be compared with the unsharded model's gradient: their "
        "shape is not its chunk along their shard dimension (first: linear1.weight)"), reason
    outcome, reason = judge("fsdp2", {**base, "max_loss_err": 3e-5, "max_loss_rel_err": 1e-3})
    assert outcome is Outcome.FAILED and reason.startswith(
        "the sharded model's loss differs from the unsharded model's on 2 ranks (gloo) (worst at step 2): losses max "
        "abs err 3e-05, max rel err 0.001, beyond 1e-05 (or 0.0001 relative)"), reason
    assert judge("fsdp2", {**base, "max_loss_err": 3e-5, "max_loss_rel_err": 5e-5})[0] is Outcome.PASSED  # relative
    for nan in ({"max_abs_err": "nan", "max_rel_err": "nan"}, {"max_loss_err": "nan", "max_loss_rel_err": "nan"}):
        assert judge("fsdp2", {**base, **nan})[0] is Outcome.FAILED, nan
    for old in (("grad_shards_unmatched",), ("max_loss_err", "max_loss_rel_err")):  # a worker that never measured
        assert judge("fsdp2", {k: v for k, v in base.items() if k not in old})[0] is Outcome.FAILED, old  # it: no pass


def test_a_compare_candidates_ddp_and_fsdp2_are_judged_against_the_baseline_steps_too() -> None:
    """Issue 46: in compare the candidate's steps are held to the baseline's fp64 golden, the baseline's own error the
    floor: off beyond it fails even where the unsharded model matches; none compared (the baseline saved nothing, an
    old worker) fails; within it passes and says so."""
    base = {**TORCHRUN_OK, "max_abs_err": 5e-7, "max_rel_err": 4.6, "world_size": 2, "backend": "gloo", "steps": 3,
            "worst_grad": "norm1.weight", "worst_grad_step": 3, "worst_grad_rank": 1, "grad_shards_compared": 72,
            "max_grad_err": 3e-6, "grad_shards_unmatched": 0, "max_loss_err": 2e-9, "max_loss_rel_err": 1e-7,
            "worst_loss_step": 2, "mode": "compare"}
    same = {"rtol": 1.3e-6, "atol": 1e-5, "baseline_torch": "2.13.0", "per_tensor": [
        tensor("loss:step1", ref_rmse=1e-8), tensor("grad:step2:linear1.weight", ref_rmse=1e-8)]}
    off = {**same, "per_tensor": [tensor("loss:step1", ref_rmse=1e-8), tensor(
        "grad:step2:linear1.weight", ref_rmse=1e-8, rmse=1e-4, mismatched=90, max_abs_err=3e-4, scale=0.1)]}
    for aspect, model in (("ddp", "DDP"), ("fsdp2", "sharded")):
        outcome, reason = judge(aspect, {**base, "vs_baseline": same})
        assert outcome is Outcome.PASSED and "; against the baseline: its losses, gradients and parameters as close to " \
            "the fp64 golden as baseline 2.13.0's: all 2 tensors are within tolerance" in reason, reason
        outcome, reason = judge(aspect, {**base, "vs_baseline": off})
        assert outcome is Outcome.FAILED and reason.startswith(
            f"the {model} model's losses, gradients or parameters differ from baseline 2.13.0's {model} steps: 1 of 2 "
            "tensors differ; worst grad:step2:linear1.weight: rmse 0.0001 > 2× the baseline's 1e-08"), reason
        assert "; against the unsharded model: matches the unsharded model in each of 3 steps" in reason, reason
        top = [{"index": "grad:step2:linear1.weight[3, 7]", "got": 0.5, "expected": 0.4995, "abs_err": 5e-4}]  # shown in 3 digits
        details = decide(spec(aspect), Observation("x", "ok", {**base, "vs_baseline": {**off, "top_mismatches": top}}))
        assert "grad:step2:linear1.weight[3, 7]: 0.5 vs 0.499, 0.0005" in details.details, details.details
        outcome, reason = judge(aspect, {**base, "baseline_missing": "the baseline saved no steps"})
        assert outcome is Outcome.FAILED and reason.startswith(
            f"not compared with the baseline's {model} steps: the baseline saved no steps"), reason
    assert judge("ddp", {**base, "mode": "save"})[0] is Outcome.PASSED  # the baseline's own: judged alone


@pytest.mark.parametrize("aspect", ["ddp", "fsdp2"])
def test_ddp_and_fsdp2_fail_a_hung_shutdown_a_nonzero_exit_and_missing_figures_before_the_training_steps(
        aspect: str) -> None:
    base = {**TORCHRUN_OK, "max_abs_err": 1e-8, "max_rel_err": 1e-6, "max_loss_err": 2e-9, "max_loss_rel_err": 1e-6,
            "max_grad_err": 3e-6, "grad_shards_compared": 72, "grad_shards_unmatched": 0, "world_size": 2,
            "backend": "gloo", "steps": 3}
    outcome, reason = judge(aspect, base)
    assert outcome is Outcome.PASSED and "every rank exited 0, shut down in 0.01 s, 0.02 s" in reason, reason
    outcome, reason = judge(aspect, {**base, "torchrun_exit": None, "hung_ranks": [1], "left_running": [4242]})
    assert outcome is Outcome.FAILED and reason.startswith("rank 1 did not finish destroy_process_group within 20 s")
    assert "[4242] left running, killed" in reason
    outcome, reason = judge(aspect, {**base, "torchrun_exit": 1, "torchrun_tail": "rank 1 exitcode: 1"})
    assert outcome is Outcome.FAILED and reason.startswith("torchrun exited 1"), reason
    for old in ("hung_ranks", "left_running"):  # an old worker's result never passes
        assert judge(aspect, {k: v for k, v in base.items() if k != old})[0] is Outcome.FAILED, old
    assert judge(aspect, {**base, "max_grad_err": 7e-3})[0] is Outcome.FAILED  # the fsdp2 rule applies
