"""The artifact rule (analysis.artifacts: export, jit, aoti, onnx) on metrics as the worker sends them: every way an
artifact fails is a failure naming the step and torch's words, a program within eager's error passes, and a changed
default ONNX exporter is said (torch-free)."""

from __future__ import annotations

from torch_upgrade_check.analysis.verdicts import decide
from torch_upgrade_check.model import CheckSpec, Observation, Outcome

SPEC = CheckSpec("head", "export", "cpu", "float32")
CLOSE = {"name": "reloaded:output", "numel": 8, "scale": 1.0, "max_abs_err": 1e-7, "mismatched": 0, "rmse": 1e-7,
         "nan": 0, "ref_rmse": 1e-7}


def judged(spec: CheckSpec = SPEC, **metrics: object) -> tuple[Outcome, str]:
    result = decide(spec, Observation(id=spec.id, status="ok", metrics=dict(metrics)))
    return result.outcome, result.reason


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


ONNX = CheckSpec("head", "onnx", "cpu", "float32")
FLIPPED = {"built": True, "load_errors": {}, "programs": ["onnxruntime"], "rtol": 1e-5, "atol": 1e-5,
           "per_tensor": [{**CLOSE, "name": "onnxruntime:output"}], "onnxruntime": "1.32.0", "mode": "compare",
           "baseline_torch": "2.8.0", "baseline_built": True, "baseline_default_exporter": "legacy",
           "default_exporter": "dynamo", "exporter": "dynamo"}


def test_onnx_a_default_exporter_flip_is_suspicious_only_for_a_call_that_relies_on_the_default() -> None:
    outcome, reason = judged(ONNX, **FLIPPED, how="default")
    assert outcome is Outcome.SUSPICIOUS
    assert reason.startswith("torch.onnx.export's default exporter changed from legacy on baseline 2.8.0 to dynamo: "
                             "your call (no dynamo= argument) now runs the dynamo exporter"), reason
    outcome, reason = judged(ONNX, **FLIPPED, how="dynamo")
    assert outcome is Outcome.PASSED and reason.endswith("(your call passes dynamo=, so it is unaffected)"), reason
    outcome, reason = judged(ONNX, **{**FLIPPED, "baseline_default_exporter": "dynamo"}, how="default")
    assert outcome is Outcome.PASSED and "changed" not in reason, reason
    outcome, reason = judged(ONNX, **{**FLIPPED, "built": False, "build_error": "torch.onnx.export: E: x"}, how="default")
    assert outcome is Outcome.FAILED and reason.startswith("the ONNX (dynamo exporter) program cannot be built: "
                                                           "torch.onnx.export: E: x; it built on baseline 2.8.0; "), reason


def test_a_shipped_file_that_loads_but_computes_other_outputs_fails_naming_the_tensor() -> None:
    spec = CheckSpec("classifier", "artifact", "cpu", "-")
    base = {"mode": "compare", "kind": "checkpoint", "file": "classifier.pt", "baseline_torch": "2.12.0",
            "baseline_built": True, "built": True, "tensors": 1, "nonfinite": [], "rtol": 1.3e-6, "atol": 1e-5}
    outcome, reason = judged(spec, **base, per_tensor=[{**CLOSE, "name": "output", "mismatched": 3, "max_abs_err": 0.02}])
    assert outcome is Outcome.FAILED
    assert reason == ("the shipped checkpoint file classifier.pt loads but does not reproduce baseline 2.12.0's outputs: "
                      "1 of 1 tensors differ; output: 3 of 8 elements, max abs err 0.02 (rtol 1.3e-06, atol 1e-05)")
    outcome, reason = judged(spec, **base, per_tensor=[{**CLOSE, "name": "output"}], max_abs_err=1e-7)
    assert outcome is Outcome.PASSED and reason.startswith("the shipped checkpoint file classifier.pt loads with default "
                                                           "arguments and reproduces baseline 2.12.0's outputs: one tensor ")
    # nothing compared is never a pass: no tensor out, no baseline to compare with, or an empty comparison
    assert judged(spec, **{**base, "tensors": 0}, per_tensor=[])[0] is Outcome.SUSPICIOUS
    outcome, reason = judged(spec, **{**base, "baseline_built": False})
    assert outcome is Outcome.SUSPICIOUS and reason.endswith("did not load it: nothing to compare with"), reason
    assert judged(spec, **base, per_tensor=[])[0] is Outcome.SUSPICIOUS
    assert judged(spec, **{**base, "mode": "alone"})[0] is Outcome.PASSED
    assert judged(spec, **{**base, "built": False, "build_error": "torch.load: E: x"})[1] == (
        "the shipped checkpoint file classifier.pt does not load and run with default arguments: torch.load: E: x; it "
        "loaded on baseline 2.12.0")
