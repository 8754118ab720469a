"""The onnx aspect on real torch, onnx and onnxruntime: A/A passes; a baseline from before 2.9's default flip and a
candidate whose exporter no longer exports gelu fail or are `suspicious` the ways a team's export call breaks; a runner
without onnxruntime skips naming the extra to install."""

from __future__ import annotations

from pathlib import Path

import pytest
from artifact_family import SCRIPTED_MODEL
from conftest import load_report, results_by_id, run_cli, user_project
from harness import interpreter
from test_checks_catch_breakage import compared, compared_broken

pytestmark = pytest.mark.usefixtures("torch_python")
GELU, LEGACY, RELU = "head[float32]/onnx", "head_legacy[float32]/onnx", "relu_head[float32]/onnx"


def workloads(folder: Path) -> None:
    """head (gelu) as the default exporter exports it, head_legacy with dynamo=False, relu_head (no gelu) by default."""
    user_project(folder, {"scripted": SCRIPTED_MODEL, "relu": SCRIPTED_MODEL.replace("nn.functional.gelu", "torch.relu")},
                 "workloads:\n"
                 "  - {name: head, factory: 'scripted:build', aspects: [onnx]}\n"
                 "  - {name: head_legacy, factory: 'scripted:build', aspects: [numerics], onnx: legacy}\n"
                 "  - {name: relu_head, factory: 'relu:build', aspects: [onnx], onnx: default}\n")


def test_the_same_torch_on_both_sides_exports_and_runs_in_onnxruntime(tmp_path: Path, torch_python: str) -> None:
    workloads(tmp_path)
    code, cand = compared(torch_python, torch_python, tmp_path / "out", GELU, LEGACY, cwd=tmp_path)
    assert code == 0, cand
    for check, exporter in ((GELU, "dynamo"), (LEGACY, "legacy")):
        assert cand[check]["outcome"] == "passed", cand[check]["reason"]
        assert cand[check]["reason"].startswith(f"ONNX ({exporter} exporter): exported, run in onnxruntime ")
        assert " against eager and baseline " in cand[check]["reason"], cand[check]["reason"]
        assert "default exporter changed" not in cand[check]["reason"]


def test_a_default_exporter_flip_and_an_export_that_no_longer_works(tmp_path: Path, torch_python: str) -> None:
    """The baseline defaults to the legacy exporter (before 2.9); the candidate's exporter raises on gelu. A call
    relying on the default fails where its model no longer exports and is suspicious where it still does; a call
    that passes dynamo=False is unaffected."""
    workloads(tmp_path)
    code, cand = compared_broken(torch_python, tmp_path, ["onnx-default-legacy"], ["export-unsupported-gelu"])
    assert code == 1
    assert {c: cand[c]["outcome"] for c in (GELU, LEGACY, RELU)} == {GELU: "failed", LEGACY: "passed",
                                                                    RELU: "suspicious"}, cand
    flip = "torch.onnx.export's default exporter changed from legacy on baseline "
    assert cand[GELU]["reason"].startswith("the ONNX (dynamo exporter) program cannot be built: torch.onnx.export: ")
    assert "unsupported operator aten.gelu.default" in cand[GELU]["reason"], cand[GELU]["reason"]
    assert "; it built on baseline " in cand[GELU]["reason"] and flip in cand[GELU]["reason"]
    assert cand[RELU]["reason"].startswith(flip) and "now runs the dynamo exporter" in cand[RELU]["reason"]
    assert cand[LEGACY]["reason"].endswith("to dynamo (your call passes dynamo=, so it is unaffected)")


def test_a_runner_without_onnxruntime_skips_naming_the_extra(tmp_path: Path, torch_python: str) -> None:
    workloads(tmp_path)
    python = str(interpreter(torch_python, tmp_path / "py", breaks=["no-onnxruntime"]))
    proc = run_cli("run", "--python", python, "--device", "cpu", "--only", GELU, "--out", str(tmp_path / "out"),
                   "--no-job-summary", cwd=tmp_path)
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    result = results_by_id(load_report(tmp_path / "out"))[GELU]
    assert (result["outcome"], result["reason"]) == ("skipped", "onnx needs onnxruntime, not installed with this torch: "
                                                     "pip install 'torch-upgrade-check[onnx]' in the environment under "
                                                     "test (onnx, onnxscript, onnxruntime)")
