"""The ddp rule (aspects.ddp.judge): fsdp2's, in DDP's own words (the shared cases: tests/aspects/fsdp2/)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fsdp2"))
from test_fsdp2_rule import TORCHRUN_OK, judge

from torch_upgrade_check.model import Outcome


def test_ddp_is_judged_by_the_fsdp2_rule_in_its_own_words() -> None:
    """DDP's gradients are whole, all-reduced on every rank: its reason names neither shards nor a sharded model."""
    base = {**TORCHRUN_OK, "max_abs_err": 5e-7, "max_rel_err": 4.6, "world_size": 2, "backend": "gloo", "steps": 3,
            "worst_grad": "norm1.weight", "worst_grad_step": 3, "worst_grad_rank": 1, "grad_shards_compared": 72,
            "max_grad_err": 3e-6, "grad_shards_unmatched": 0, "max_loss_err": 2e-9, "max_loss_rel_err": 1e-7,
            "worst_loss_step": 2}
    outcome, reason = judge("ddp", base)
    assert outcome is Outcome.PASSED and "72 all-reduced gradients (each rank's) within 3e-06" in reason, reason
    assert "shards" not in reason and "the sharded" not in reason, reason  # 'unsharded' stays: the reference
    outcome, reason = judge("ddp", {**base, "max_grad_err": 7e-3})
    assert outcome is Outcome.FAILED and reason.startswith(
        "the all-reduced gradients differ from the unsharded model's on 2 ranks (gloo): gradient of norm1.weight"), reason
    outcome, reason = judge("ddp", {**base, "grad_shards_compared": 0})
    assert outcome is Outcome.FAILED and "no all-reduced gradient was compared" in reason, reason
    outcome, reason = judge("ddp", {**base, "max_loss_err": 3e-5, "max_loss_rel_err": 1e-3})
    assert outcome is Outcome.FAILED and reason.startswith("the DDP model's loss differs from the unsharded model's"), \
        reason
