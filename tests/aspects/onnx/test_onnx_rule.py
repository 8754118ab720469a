"""The onnx rule (aspects.onnx.judge, through verdicts.decide): a changed default ONNX exporter is said, and makes a
pass `suspicious` only for a call that relies on the default (torch-free)."""

from __future__ import annotations

from artifact_family import CLOSE, judged

from torch_upgrade_check.model import CheckSpec, Outcome

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
