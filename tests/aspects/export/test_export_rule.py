"""The deployment programs' rule (aspects.export.judge, through verdicts.decide: export, jit, aoti) on metrics as the
worker sends them: every way a program fails is a failure naming the step and torch's words, and a program within
eager's error passes (torch-free)."""

from __future__ import annotations

from artifact_family import CLOSE, judged

from torch_upgrade_check.model import CheckSpec, Outcome


def test_a_model_that_no_longer_builds_fails_naming_the_error_and_the_baseline() -> None:
    outcome, reason = judged(built=False, build_error="torch.export.export: RuntimeError: unsupported op",
                             mode="compare", baseline_torch="2.12.0", baseline_built=True)
    assert (outcome, reason) == (Outcome.FAILED, "the torch.export program cannot be built: torch.export.export: "
                                                 "RuntimeError: unsupported op; it built on baseline 2.12.0")


def test_a_program_that_does_not_save_or_load_fails_with_torchs_words() -> None:
    jit = CheckSpec("head", "jit", "cpu", "float32")
    assert judged(jit, built=True, how="script", save_error="torch.jit.save: RuntimeError: x") == (
        Outcome.FAILED, "the TorchScript (script) program was built but cannot be saved: torch.jit.save: RuntimeError: x")
    outcome, reason = judged(built=True, mode="compare", baseline_torch="2.12.0", baseline_built=True,
                             load_errors={"baseline's program": "torch.export.load: SerializeError: schema"})
    assert outcome is Outcome.FAILED
    assert reason == ("the saved torch.export program does not load and run in a fresh process (saved by baseline "
                      "2.12.0): baseline's program: torch.export.load: SerializeError: schema")


def test_programs_within_eagers_error_pass_and_a_wrong_one_fails() -> None:
    outcome, reason = judged(built=True, load_errors={}, programs=["in-process", "reloaded"], rtol=1e-5, atol=1e-5,
                             per_tensor=[CLOSE, {**CLOSE, "name": "in-process:output"}])
    assert outcome is Outcome.PASSED
    assert reason.startswith("torch.export: built, run, saved and reloaded in a fresh process; all 2 tensors are within")
    wrong = {**CLOSE, "mismatched": 8, "rmse": 0.05, "max_abs_err": 0.1}
    outcome, reason = judged(built=True, load_errors={}, programs=["in-process", "reloaded"], rtol=1e-5, atol=1e-5,
                             per_tensor=[wrong, {**CLOSE, "name": "in-process:output"}])
    assert outcome is Outcome.FAILED and "reloaded:output: rmse 0.05 > 2× eager's" in reason, reason
