"""scripts/gpu-smoke.sh end to end on this CPU (`--device cpu`): what a GPU box runs, proven here."""

from __future__ import annotations

import json
import os
import subprocess
import venv
from pathlib import Path

import pytest
from conftest import ROOT

SCRIPT = ROOT / "scripts" / "gpu-smoke.sh"


def smoke(*args: str, python: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(["bash", str(SCRIPT), "--python", python, *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=1800, check=False)


def test_smoke_runs_the_suite_and_an_aa_compare_into_one_folder(tmp_path: Path, torch_python: str) -> None:
    proc = smoke("--device", "cpu", "--out", "smoke", "--", "--only", "mlp[float32]/*", "--only", "matmul[float32]/*",
                 python=torch_python, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = tmp_path / "smoke"
    for part in ("run", "compare"):
        for name in ("report.json", "junit.xml", "summary.md"):
            assert (out / part / name).is_file(), f"{part}/{name}"
    doc = json.loads((out / "compare" / "report.json").read_text())
    assert [r["role"] for r in doc["reports"]] == ["baseline", "candidate"]
    assert any(r["aspect"] == "latency" and "change" in r["metrics"] for r in doc["reports"][1]["results"])
    log = (out / "smoke.log").read_text()
    assert "run exited 0" in log and "compare (A/A) exited 0" in log and "torch 2." in log
    summary = (out / "summary.md").read_text()
    assert summary.startswith("# gpu-smoke on cpu") and summary.count("## ") >= 2  # both summaries


def test_smoke_names_what_is_missing(tmp_path: Path) -> None:
    venv.create(tmp_path / "bare", with_pip=False)
    proc = smoke("--device", "cpu", python=str(tmp_path / "bare" / "bin" / "python"), cwd=tmp_path)
    assert proc.returncode == 3
    assert "lacks: torch (the one to test); PyYAML (pip install pyyaml); junitparser" in proc.stderr


@pytest.mark.parametrize(("args", "message"), [(["--device", "tpu"], "--device must be cuda, mps, cpu or auto"),
                                               (["--frobnicate"], "unknown argument '--frobnicate'")])
def test_smoke_bad_arguments_exit_2(tmp_path: Path, torch_python: str, args: list[str], message: str) -> None:
    proc = smoke(*args, python=torch_python, cwd=tmp_path)
    assert proc.returncode == 2 and message in proc.stderr
