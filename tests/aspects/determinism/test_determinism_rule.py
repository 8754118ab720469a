"""The determinism family's rule (aspects.determinism.judge, through verdicts.decide): two steps bitwise equal pass,
any difference fails naming the first tensor; deterministic-backward says which FlexAttention backends ran."""

from __future__ import annotations

from torch_upgrade_check.analysis.verdicts import decide
from torch_upgrade_check.model import CheckSpec, Observation, Outcome


def spec(aspect: str) -> CheckSpec:
    return CheckSpec(workload="mlp", aspect=aspect, device="cpu", dtype="float32")


def test_determinism_requires_bitwise_equality() -> None:
    same = {"bitwise_equal": True, "differing_tensors": 0, "compared_tensors": 7, "max_abs_diff": 0.0}
    assert decide(spec("determinism"), Observation("x", "ok", same)).outcome is Outcome.PASSED
    diff = {**same, "bitwise_equal": False, "differing_tensors": 2, "max_abs_diff": 1e-9,
            "first_differing": ["grad:0.weight"]}
    r = decide(spec("determinism"), Observation("x", "ok", diff))
    assert r.outcome is Outcome.FAILED and "grad:0.weight" in r.reason


def test_deterministic_backward_names_its_backends_and_why_flash_did_not_run() -> None:
    same = {"bitwise_equal": True, "backends": {"TRITON": {}, "FLASH": None}, "flash_not_run": "an sm90 GPU"}
    r = decide(spec("deterministic-backward"), Observation("x", "ok", same))
    assert r.outcome is Outcome.PASSED and r.reason == (
        "two compiled FlexAttention training steps (TRITON, FLASH) are bitwise equal under deterministic algorithms; "
        "BACKEND='FLASH' not run: needs an sm90 GPU")
