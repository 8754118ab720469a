"""The artifact rule (aspects.artifact.judge, through verdicts.decide): a shipped file that loads but computes other
outputs fails naming the tensor, and nothing compared is never a pass (torch-free)."""

from __future__ import annotations

from artifact_family import CLOSE, judged

from torch_upgrade_check.model import CheckSpec, Outcome


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
