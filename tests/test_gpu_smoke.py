"""scripts/gpu-smoke.sh end to end on this CPU (`--device cpu`): what a GPU box runs, proven here."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sysconfig
import time
import venv
from pathlib import Path

import pytest
from conftest import ROOT

SCRIPT = ROOT / "scripts" / "gpu-smoke.sh"


def smoke(*args: str, python: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(["bash", str(SCRIPT), "--python", python, *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=1800, check=False)


@pytest.mark.serial  # its verdict is a timing: run alone, after the parallel phase
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
    # one line per check as it finishes, then the final table: a row per check, both commands' outcomes
    assert re.search(r"\[ *\d+/\d+\] PASSED +mlp\[float32\]/numerics", proc.stdout)
    assert re.search(r"^mlp\[float32\]/numerics +passed +passed$", proc.stdout, re.M)
    assert re.search(r"^matmul\[float32\]/cross-version +- +passed$", proc.stdout, re.M)


def without_junitparser(tmp_path: Path) -> str:
    """A venv whose packages are this interpreter's (the tests', with torch) but junitparser: a GPU box with only
    torch and PyYAML, and whatever they need."""
    site = Path(sysconfig.get_paths()["purelib"])
    shelf = tmp_path / "shelf"
    shelf.mkdir()
    for entry in site.iterdir():
        if not entry.name.lower().startswith("junitparser") and entry.suffix != ".pth":
            (shelf / entry.name).symlink_to(entry)
    venv.create(tmp_path / "bare", with_pip=False)
    bare = tmp_path / "bare" / "bin" / "python"
    purelib = subprocess.run([bare, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    Path(purelib, "shelf.pth").write_text(f"{shelf}\n")
    probe = subprocess.run([bare, "-c", "import torch, yaml, junitparser"], capture_output=True, text=True, check=False)
    assert "No module named 'junitparser'" in probe.stderr
    return str(bare)


@pytest.mark.usefixtures("torch_python")
def test_smoke_runs_with_only_torch_and_pyyaml(tmp_path: Path) -> None:
    proc = smoke("--device", "cpu", "--out", "smoke", "--", "--only", "matmul[float32]/numerics",
                 python=without_junitparser(tmp_path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = tmp_path / "smoke"
    assert "junitparser is not installed: the junit.xml files are skipped" in proc.stdout
    for part in ("run", "compare"):
        assert (out / part / "report.json").is_file() and (out / part / "summary.md").is_file()
        assert not (out / part / "junit.xml").exists()
    assert "junit.xml not written: junitparser is not installed" in proc.stdout + proc.stderr


def test_a_stopped_smoke_leaves_every_finished_check_and_its_table(tmp_path: Path, torch_python: str) -> None:
    """report.json is rewritten after every check: a smoke stopped by a timeout's TERM leaves what finished."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.Popen(["bash", str(SCRIPT), "--python", torch_python, "--device", "cpu", "--out", "smoke", "--",
                             "--only", "mlp[float32]/*"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    report = tmp_path / "smoke" / "run" / "report.json"
    deadline = time.monotonic() + 600
    finished: list[str] = []
    while not finished and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
        try:
            finished = [r["id"] for r in json.loads(report.read_text())["results"] if r["outcome"] == "passed"]
        except (OSError, ValueError, KeyError):
            continue
    assert finished and proc.poll() is None, "the run should still be going after its first check"
    proc.send_signal(signal.SIGTERM)
    stdout, _ = proc.communicate(timeout=120)
    assert proc.returncode == 143, stdout[-3000:]
    assert "stopped before the end" in stdout and "(stopped before the end)" in stdout
    assert re.search(rf"^{re.escape(finished[0])} +passed", stdout, re.M)
    assert (tmp_path / "smoke" / "summary.md").is_file()


def test_smoke_avoids_bash_32_pitfalls() -> None:
    """macOS ships bash 3.2: there "${a[@]}" of an empty array is an unbound-variable error under set -u (the
    smoke exited having run nothing), and bash 4 features do not exist."""
    text = SCRIPT.read_text()
    code = "\n".join(line.split(" #")[0] for line in text.splitlines() if not line.lstrip().startswith("#"))
    for m in re.finditer(r'"\$\{(\w+)\[@\]\}"', code):
        guard = code[max(0, m.start() - len(m.group(1)) - 6): m.start()]
        assert guard == f"${{{m.group(1)}[@]+", f"unguarded {m.group()}: write ${{{m.group(1)}[@]+{m.group()}}}"
    for bash4 in ("declare -A", "mapfile", "readarray", ",,}", "^^}", "|&", "&>>", ";;&", "declare -n", "coproc",
                  "${!", "wait -n"):
        assert bash4 not in code, f"{bash4!r} is not in bash 3.2"
    proc = subprocess.run(["bash", "--posix", str(SCRIPT), "--help"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0 and "bash 3.2" in proc.stdout


def test_smoke_names_what_is_missing(tmp_path: Path) -> None:
    venv.create(tmp_path / "bare", with_pip=False)
    proc = smoke("--device", "cpu", python=str(tmp_path / "bare" / "bin" / "python"), cwd=tmp_path)
    assert proc.returncode == 3
    assert "lacks: torch (the one to test); PyYAML (pip install pyyaml)." in proc.stderr  # junitparser is optional


@pytest.mark.parametrize(("args", "message"), [(["--device", "tpu"], "--device must be cuda, mps, cpu or auto"),
                                               (["--frobnicate"], "unknown argument '--frobnicate'")])
def test_smoke_bad_arguments_exit_2(tmp_path: Path, torch_python: str, args: list[str], message: str) -> None:
    proc = smoke(*args, python=torch_python, cwd=tmp_path)
    assert proc.returncode == 2 and message in proc.stderr
