"""Deployment artifacts (export, jit): the program built, saved and reloaded in a fresh process passes on the real
torch and against itself in `compare`, and fails on a torch broken the ways upgrades broke artifacts: a program the
baseline saved that the candidate's loader rejects, and a model that exported on the baseline and no longer does."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness import interpreter
from test_checks_catch_breakage import compared, outcomes

pytestmark = pytest.mark.usefixtures("torch_python")
EXPORT, JIT = "mlp[float32]/export", "mlp[float32]/jit"


def test_the_same_torch_on_both_sides_loads_and_runs_the_baselines_programs(tmp_path: Path, torch_python: str) -> None:
    code, cand = compared(torch_python, torch_python, tmp_path, EXPORT, JIT)
    assert code == 0, cand
    for check, what in ((EXPORT, "torch.export: "), (JIT, "TorchScript (trace): ")):
        assert cand[check]["outcome"] == "passed", cand[check]["reason"]
        assert cand[check]["reason"].startswith(what + "built, run, saved and reloaded in a fresh process; baseline ")
        assert "'s saved program loaded and run; all 3 tensors are within tolerance" in cand[check]["reason"]
        assert cand[check]["metrics"]["programs"] == ["baseline's program", "in-process", "reloaded"]


def test_a_loader_that_rejects_the_baselines_schema_fails_export_in_compare(tmp_path: Path, torch_python: str) -> None:
    broken = str(interpreter(torch_python, tmp_path / "py", breaks=["export-schema-bump"]))
    alone = outcomes(broken, tmp_path / "run", EXPORT)[EXPORT]
    assert alone["outcome"] == "passed", alone["reason"]  # what it saves it loads
    code, cand = compared(torch_python, broken, tmp_path / "out", EXPORT)
    assert (code, cand[EXPORT]["outcome"]) == (1, "failed"), cand[EXPORT]["reason"]
    reason = cand[EXPORT]["reason"]
    assert "the saved torch.export program does not load and run in a fresh process (saved by baseline " in reason
    assert "baseline's program: torch.export.load: SerializeError: Serialized schema version" in reason
    assert "does not match our current schema version (9, 0)" in reason and "reloaded" not in reason


def test_a_model_that_no_longer_exports_fails_export_naming_the_op(tmp_path: Path, torch_python: str) -> None:
    broken = str(interpreter(torch_python, tmp_path / "py", breaks=["export-unsupported-gelu"]))
    code, cand = compared(torch_python, broken, tmp_path / "out", EXPORT, JIT)
    assert (code, cand[EXPORT]["outcome"], cand[JIT]["outcome"]) == (1, "failed", "passed"), cand
    reason = cand[EXPORT]["reason"]
    assert reason.startswith("the torch.export program cannot be built: torch.export.export: RuntimeError: Could not "
                             "export: unsupported operator aten.gelu.default"), reason
    assert "; it built on baseline " in reason and "(passed on baseline" in reason
