"""The imports check: every module of every distribution imported in a process of its own, on both sides.

The environments are real venvs holding torch (and what it imports) with two small packages built here that
load native code through torch on import, as compiled extensions do; the candidate's torch is broken by the
harness the ways real upgrades broke such extensions: an undefined symbol, an abort on registration.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import run_cli
from harness import interpreter
from stack_envs import build_env

from torch_upgrade_check.aspects.imports import host as imports


@pytest.fixture(scope="module")
def env_python(tmp_path_factory: pytest.TempPathFactory, torch_python: str) -> str:
    return str(build_env(tmp_path_factory.mktemp("imports") / "venv"))


def _compare(tmp_path: Path, baseline: Path, candidate: Path) -> tuple[int, dict, dict, str]:
    proc = run_cli("compare", "--baseline-python", str(baseline), "--candidate-python", str(candidate),
                   "--only", "imports", "--device", "cpu", "--timeout", "60", "--out", str(tmp_path / "out"))
    base, cand = json.loads((tmp_path / "out" / "report.json").read_text())["reports"]
    result = {r["id"]: r for r in cand["results"]}["stack[-]/imports"]
    return proc.returncode, {r["id"]: r for r in base["results"]}["stack[-]/imports"], result, proc.stdout + proc.stderr


def test_the_environment_lists_its_distributions_and_modules(env_python: str) -> None:
    listed = imports.list_modules(env_python)
    assert listed["tuc-ext-load"] == ("1.0", ["tuc_ext_load"]) and listed["tuc-ext-ops"] == ("1.0", ["tuc_ext_ops"])
    assert "torch" in listed["torch"][1]
    assert "pytest" not in listed  # read inside the venv under test, not the orchestrator's


def test_an_extension_that_raises_or_aborts_on_the_candidate_fails(tmp_path: Path, env_python: str) -> None:
    baseline = interpreter(env_python, tmp_path / "baseline")
    candidate = interpreter(env_python, tmp_path / "candidate",
                            breaks=("extension-undefined-symbol", "extension-registration-aborts"))
    code, base, cand, output = _compare(tmp_path, baseline, candidate)
    assert code == 1, output
    assert base["outcome"] == "passed" and cand["outcome"] == "failed", cand["reason"]
    assert sorted(cand["metrics"]["broken"]) == ["tuc_ext_load", "tuc_ext_ops"]
    assert "tuc_ext_load (tuc-ext-load 1.0) raised: OSError: " in cand["reason"]
    assert "undefined symbol: _ZN3c104impl23ExcludeDispatchKeyGuard" in cand["reason"]
    assert "tuc_ext_ops (tuc-ext-ops 1.0) crashed: killed by SIGABRT" in cand["reason"]
    assert cand["metrics"]["modules"]["torch"]["status"] == "ok"  # torch itself still imports


@pytest.mark.fast  # in the fast tier: one of the few e2e tests that together run every module
def test_a_a_passes(tmp_path: Path, env_python: str) -> None:
    code, base, cand, output = _compare(tmp_path, interpreter(env_python, tmp_path / "a"),
                                        interpreter(env_python, tmp_path / "b"))
    assert code == 0, output
    assert cand["outcome"] == "passed" and cand["reason"].startswith("every module that imports with baseline 2.13.0"), cand
    assert cand["metrics"]["broken"] == [] and cand["metrics"]["gone"] == []


def test_a_hang_and_a_signal_are_told_apart_from_an_error(tmp_path: Path) -> None:
    (tmp_path / "tuc_sleepy.py").write_text("import time\ntime.sleep(60)\n")
    (tmp_path / "tuc_segv.py").write_text("import ctypes\nctypes.string_at(0)\n")
    (tmp_path / "tuc_raises.py").write_text("raise ImportError('libfoo.so.3: cannot open shared object file\\nmore')\n")
    got = {m: imports.import_one(sys.executable, m, "1", m, timeout_s=3, cwd=str(tmp_path))
           for m in ("tuc_sleepy", "tuc_segv", "tuc_raises")}
    assert (got["tuc_sleepy"].status, got["tuc_sleepy"].error) == ("timeout", "no import within 3 s")
    assert (got["tuc_segv"].status, got["tuc_segv"].error) == ("signal", "killed by SIGSEGV")
    assert (got["tuc_raises"].status, got["tuc_raises"].error) == (
        "error", "ImportError: libfoo.so.3: cannot open shared object file")


def test_judgement_names_what_broke_and_what_was_already_broken() -> None:
    def side(**statuses: str) -> dict[str, imports.Imported]:
        return {m: imports.Imported(m.upper(), "1", m, s, "" if s == "ok" else "boom") for m, s in statuses.items()}

    done = {"baseline": side(a="ok", b="ok", c="error", d="ok"), "candidate": side(a="ok", b="timeout", c="error")}
    results = imports.judge_sides(done, device="cpu", repro="", baseline_label="2.13.0")
    cand = results["candidate"]
    assert cand.outcome.value == "failed"
    assert cand.metrics["broken"] == ["b"] and cand.metrics["gone"] == ["d"] and cand.metrics["also_on_baseline"] == ["c"]
    assert cand.reason.startswith("2 of 4 modules that import with baseline 2.13.0 do not here: b (B 1) hung: boom; "
                                  "d (D 1) is no longer installed; 1 fail with baseline 2.13.0 too: c (C 1) raised: boom")
    alone = imports.judge_sides({"candidate": done["candidate"]}, device="cpu", repro="")["candidate"]
    assert alone.outcome.value == "suspicious"  # nothing says they ever imported


@pytest.mark.slow
def test_the_stack_goes_into_both_venvs_beside_each_sides_torch(tmp_path: Path) -> None:
    """A/A with a real stack: resolved, installed beside torch 2.13.0 (the venv named after the stack too) and
    every module imported on both sides."""
    (tmp_path / "requirements.txt").write_text("iniconfig==2.3.1\ntorch==2.12.0  # set aside: each side pins its own\n")
    venvs = tmp_path / "venvs"
    proc = run_cli("compare", "--baseline", "2.13.0", "--candidate", "2.13.0", "--installer", "pip",
                   "--torch-backend", "pypi", "--venv-dir", str(venvs), "--device", "cpu", "--only", "stack",
                   "--requirements", str(tmp_path / "requirements.txt"), "--out", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    base, cand = json.loads((tmp_path / "out" / "report.json").read_text())["reports"]
    got = {r["id"]: r for r in cand["results"]}
    assert got["stack[-]/resolve"]["outcome"] == "passed" and got["stack[-]/imports"]["outcome"] == "passed"
    assert got["stack[-]/imports"]["metrics"]["modules"]["iniconfig"]["status"] == "ok"
    assert cand["label"].startswith("2.13.0")
    (record,) = [json.loads(p.read_text()) for p in venvs.glob("torch-2.13.0-*/torch-upgrade-check-env.json")]
    assert record["plan"]["extra_requirements"] == ["iniconfig==2.3.1"]
