"""Deployment artifacts (export, jit): the program built, saved and reloaded in a fresh process passes on the real
torch and against itself in `compare`, and fails on a torch broken the ways upgrades broke artifacts: a program the
baseline saved that the candidate's loader rejects, and a model that exported on the baseline and no longer does."""

from __future__ import annotations

from pathlib import Path

import pytest
from artifact_family import SCRIPTED_MODEL
from conftest import load_report, results_by_id, run_cli, user_project
from harness import interpreter
from test_checks_catch_breakage import compared, compared_broken, outcomes

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


@pytest.mark.parametrize(("breakage", "check", "why"), [
    ("export-schema-bump", EXPORT, "baseline's program: torch.export.load: SerializeError: Serialized schema version"),
    ("jit-format-bump", JIT, "baseline's program: torch.jit.load: RuntimeError: PytorchStreamReader failed reading "
                             "file"),
])
def test_a_loader_that_rejects_the_baselines_program_fails_compare(tmp_path: Path, torch_python: str, breakage: str,
                                                                   check: str, why: str) -> None:
    broken = str(interpreter(torch_python, tmp_path / "py", breaks=[breakage]))
    alone = outcomes(broken, tmp_path / "run", check)[check]
    assert alone["outcome"] == "passed", alone["reason"]  # what it saves it loads
    code, cand = compared(torch_python, broken, tmp_path / "out", check)
    assert (code, cand[check]["outcome"]) == (1, "failed"), cand[check]["reason"]
    reason = cand[check]["reason"]
    assert " program does not load and run in a fresh process (saved by baseline " in reason
    assert why in reason and "reloaded" not in reason  # its own program loads


def test_a_loaded_program_that_computes_other_numbers_fails_naming_the_program(tmp_path: Path,
                                                                              torch_python: str) -> None:
    """Issue 37: every artifact breakage was a load or build failure. Here the program loads and runs and its outputs
    are x(1+1e-3) (loaded-program-1e-3): alone, the program reloaded in the fresh process fails and the one built in
    the worker passes; in compare the candidate's loads of its own and of the baseline's program fail (the same torch
    on both sides passes: the test above)."""
    broken = str(interpreter(torch_python, tmp_path / "py", breaks=["loaded-program-1e-3"]))
    alone = outcomes(broken, tmp_path / "run", EXPORT, JIT)
    for check in (EXPORT, JIT):
        result = alone[check]
        assert result["outcome"] == "failed", result["reason"]
        assert "; 1 of 2 tensors differ; worst reloaded:output: rmse " in result["reason"], result["reason"]
        per = {t["name"]: t for t in result["metrics"]["per_tensor"]}
        assert per["in-process:output"]["mismatched"] == 0, per
        assert 0.9e-3 < per["reloaded:output"]["rmse"] / per["reloaded:output"]["scale"] < 1.1e-3, per  # the 1e-3
    code, cand = compared(torch_python, broken, tmp_path / "out", EXPORT, JIT)
    for check in (EXPORT, JIT):
        reason = cand[check]["reason"]
        assert (code, cand[check]["outcome"]) == (1, "failed"), reason
        assert "'s saved program loaded and run; 2 of 3 tensors differ; worst " in reason, reason
        failed = {t["name"] for t in cand[check]["metrics"]["per_tensor"] if t["mismatched"]}
        assert failed == {"baseline's program:output", "reloaded:output"}, failed


def test_a_model_that_no_longer_exports_fails_export_naming_the_op(tmp_path: Path, torch_python: str) -> None:
    broken = str(interpreter(torch_python, tmp_path / "py", breaks=["export-unsupported-gelu"]))
    code, cand = compared(torch_python, broken, tmp_path / "out", EXPORT, JIT)
    assert (code, cand[EXPORT]["outcome"], cand[JIT]["outcome"]) == (1, "failed", "passed"), cand
    reason = cand[EXPORT]["reason"]
    assert reason.startswith("the torch.export program cannot be built: torch.export.export: RuntimeError: Could not "
                             "export: unsupported operator aten.gelu.default"), reason
    assert "; it built on baseline " in reason and "(passed on baseline" in reason


def head_workload(folder: Path, keys: str) -> None:
    """A config in `folder` whose one workload, `head`, is SCRIPTED_MODEL with `keys` (YAML lines, indented)."""
    (folder / "scripted.py").write_text(SCRIPTED_MODEL)
    (folder / "torch-upgrade-check.yml").write_text(
        "version: 1\nsuite: none\npython-path: [.]\nworkloads:\n  - name: head\n    factory: scripted:build\n" + keys)


def test_a_scripted_workload_fails_jit_where_script_no_longer_compiles_it(tmp_path: Path, torch_python: str) -> None:
    """`jit: script` plans jit with torch.jit.script; A/A passes, and a candidate that cannot script the model fails."""
    head_workload(tmp_path, "    aspects: [numerics]\n    jit: script\n")
    check = "head[float32]/jit"
    code, same = compared(torch_python, torch_python, tmp_path / "aa", cwd=tmp_path)
    assert (code, same[check]["outcome"], same[check]["metrics"]["how"]) == (0, "passed", "script"), same[check]
    assert same[check]["reason"].startswith("TorchScript (script): built, run, saved and reloaded in a fresh process; "
                                            "baseline "), same[check]["reason"]
    broken = str(interpreter(torch_python, tmp_path / "py", breaks=["script-unsupported-gelu"]))
    code, cand = compared(torch_python, broken, tmp_path / "out", cwd=tmp_path)
    assert (code, cand[check]["outcome"], cand["head[float32]/numerics"]["outcome"]) == (1, "failed", "passed"), cand
    assert cand[check]["reason"].startswith("the TorchScript (script) program cannot be built: torch.jit.script: "
                                            "NotSupportedError: Compiled functions can't take variable number of "
                                            "arguments"), cand[check]["reason"]
    assert "; it built on baseline " in cand[check]["reason"]


def test_an_aoti_package_that_does_not_load_in_a_fresh_process_fails_aoti(tmp_path: Path, torch_python: str) -> None:
    """pytorch#173706: the package loads where it was compiled and not in a fresh process. The real torch passes, on
    both sides of a compare too (each side builds its own package: torch promises no cross-version load)."""
    head_workload(tmp_path, "    aspects: [aoti]\n")
    check = "head[float32]/aoti"
    code, same = compared(torch_python, torch_python, tmp_path / "aa", cwd=tmp_path)
    assert (code, same[check]["outcome"]) == (0, "passed"), same[check]["reason"]
    assert same[check]["reason"].startswith("AOTInductor: built, run, saved and reloaded in a fresh process from "
                                            "baseline "), same[check]["reason"]
    assert "(its package is not loaded: torch promises no cross-version load)" in same[check]["reason"]
    assert same[check]["metrics"]["programs"] == ["in-process", "reloaded"]  # the baseline's package is not loaded
    broken = str(interpreter(torch_python, tmp_path / "py", breaks=["aoti-fresh-process-load"]))
    proc = run_cli("run", "--python", broken, "--device", "cpu", "--out", str(tmp_path / "broken"), "--no-job-summary",
                   cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = results_by_id(load_report(tmp_path / "broken"))[check]
    assert result["outcome"] == "failed", result["reason"]
    assert result["reason"].startswith("the saved AOTInductor program does not load and run in a fresh process: "
                                       "reloaded: torch._inductor.aoti_load_package: RuntimeError: Error in dlopen: ")


def test_a_runner_without_a_cpp_compiler_skips_aoti_with_torchs_reason(tmp_path: Path, torch_python: str) -> None:
    """Inductor looks for CXX (else g++) and runs it; none that runs is a skip, never an error (numerics runs: a run
    where nothing ran fails)."""
    head_workload(tmp_path, "    aspects: [numerics, aoti]\n")
    proc = run_cli("run", "--python", torch_python, "--device", "cpu", "--out", str(tmp_path / "out"),
                   "--no-job-summary", cwd=tmp_path, env={"CXX": str(tmp_path / "no-such-c++")})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = results_by_id(load_report(tmp_path / "out"))["head[float32]/aoti"]
    assert (result["outcome"], result["reason"]) == (
        "skipped", "no C++ compiler on the runner (AOTInductor compiles the program to C++): No working C++ compiler "
                   f"found in torch._inductor.config.cpp.cxx: (None, '{tmp_path / 'no-such-c++'}'); install g++ or set "
                   "CXX to a C++ compiler")


DYNAMIC = SCRIPTED_MODEL + """

def dynamic():
    model, inputs = build()
    return {"model": model, "inputs": inputs, "dynamic_shapes": {"x": {0: torch.export.Dim("batch", min=2, max=64)}},
            "dynamic_inputs": (torch.randn(9, 16),)}
"""


def test_declared_dynamic_shapes_export_and_run_other_sizes_and_fail_where_export_specialises(
        tmp_path: Path, torch_python: str) -> None:
    """A factory's dynamic_shapes go to torch.export.export and its dynamic_inputs (batch 9, exported at 4) are run by
    the program in the worker and the fresh process: A/A passes; an export that drops the dynamic shapes fails."""
    user_project(tmp_path, {"scripted": DYNAMIC}, "workloads:\n  - {name: head, factory: 'scripted:dynamic', "
                                                  "aspects: [export]}\n")
    check = "head[float32]/export"
    code, same = compared(torch_python, torch_python, tmp_path / "aa", cwd=tmp_path)
    assert (code, same[check]["outcome"]) == (0, "passed"), same[check]["reason"]
    assert same[check]["reason"].startswith("torch.export: built with dynamic shapes, run, saved and reloaded in a "
                                            "fresh process, each run on dynamic_inputs too; "), same[check]["reason"]
    assert "in-process, dynamic_inputs" in same[check]["metrics"]["programs"]
    assert "reloaded, dynamic_inputs" in same[check]["metrics"]["programs"]
    code, cand = compared_broken(torch_python, tmp_path, [], ["export-drops-dynamic-shapes"])
    assert (code, cand[check]["outcome"]) == (1, "failed"), cand[check]["reason"]
    assert cand[check]["reason"].startswith("the torch.export program does not run on the workload's dynamic_inputs "
                                            "(built with its dynamic_shapes: a declared dynamic dimension was "
                                            "specialised): in-process, dynamic_inputs: running the program on "
                                            "dynamic_inputs: "), cand[check]["reason"]
    assert "reloaded, dynamic_inputs: running the loaded program: " in cand[check]["reason"]
