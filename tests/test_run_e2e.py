"""`run` end to end: real torch in real worker processes, real faults, real exit codes."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import venv
from pathlib import Path

import pytest
from conftest import FIXTURES, load_report, results_by_id, run_cli

pytestmark = pytest.mark.usefixtures("torch_python")


@pytest.mark.fast  # in the fast tier: one of the few e2e tests that together run every module
def test_subset_passes_and_writes_every_file(tmp_path: Path, torch_python: str) -> None:
    out = tmp_path / "out"
    proc = run_cli("run", "--python", torch_python, "--device", "cpu", "--out", str(out),
                   "--only", "mlp", "--only", "matmul[bfloat16]/numerics")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = load_report(out)
    assert report["complete"] is True and report["device"] == "cpu"
    env = report["environment"]
    assert env["torch_version"].startswith("2.") and env["threads"] >= 1 and env["python"]
    assert env["probes"]["cpu"]["available"] is True and env["probes"]["cuda"]["available"] is False
    by_id = results_by_id(report)
    assert by_id["mlp[float32]/cross-backend"]["outcome"] == "skipped"
    assert "--device cpu was asked" in by_id["mlp[float32]/cross-backend"]["reason"]
    assert by_id["mlp[float32]/numerics"]["outcome"] == "passed"
    assert by_id["mlp[float32]/numerics"]["metrics"]["max_abs_err"] < 1e-5
    assert by_id["mlp[float32]/compile"]["metrics"]["compile_time_s"] > 0
    lat = by_id["mlp[float32]/latency"]["metrics"]
    assert len(lat["samples_ms"]) >= 5 and lat["median_ms"] > 0
    assert by_id["mlp[float32]/memory"]["metrics"]["peak_bytes"] > 0
    assert by_id["matmul[bfloat16]/numerics"]["outcome"] == "passed"
    assert "--only 'mlp[float32]/numerics'" in by_id["mlp[float32]/numerics"]["repro"]
    for name in ("report.json", "junit.xml", "summary.md"):
        assert (out / name).is_file()
    assert "PASSED" in proc.stdout and "mlp[float32]/numerics" in proc.stdout


def test_latency_limit_crossed_exits_1(tmp_path: Path, torch_python: str) -> None:
    proc = run_cli("run", "--python", torch_python, "--device", "cpu", "--out", str(tmp_path),
                   "--only", "matmul[float32]/latency", "--max-latency-ms", "matmul=0.000001")
    assert proc.returncode == 1, proc.stderr
    r = results_by_id(load_report(tmp_path))["matmul[float32]/latency"]
    assert r["outcome"] == "failed" and r["thresholds"] == {"max_latency_ms": 1e-6}


def test_repro_command_reruns_exactly_one_check(tmp_path: Path, torch_python: str) -> None:
    run_cli("run", "--python", torch_python, "--device", "cpu", "--out", str(tmp_path / "a"),
            "--only", "matmul[float16]/numerics")
    repro = results_by_id(load_report(tmp_path / "a"))["matmul[float16]/numerics"]["repro"]
    args = repro.split(" ", 1)[1]
    proc = subprocess.run(f"{sys.executable} -m torch_upgrade_check {args} --out {tmp_path / 'b'}", shell=True, check=False,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert [r["id"] for r in load_report(tmp_path / "b")["results"]] == ["matmul[float16]/numerics"]


FAULTS = {
    "segv": ("faulty:segfault", "crashed: killed by SIGSEGV"),
    "abrt": ("faulty:abort", "crashed: killed by SIGABRT"),
    "hang": ("faulty:hang", "timed out after 20s"),
    "boom": ("faulty:raises", "RuntimeError: factory exploded on purpose"),
}


def test_faults_in_real_workers_are_recorded_and_other_results_survive(tmp_path: Path, torch_python: str) -> None:
    args = ["run", "--python", torch_python, "--device", "cpu", "--out", str(tmp_path), "--timeout", "20",
            "--python-path", str(FIXTURES), "--workload", "good=faulty:good", "--workload", "nan=faulty:nan_output"]
    for name, (factory, _) in FAULTS.items():
        args += ["--workload", f"{name}={factory}"]
    # Interleave good checks between the faults: each must survive the crash before it.
    for name in ("good", "segv", "good", "abrt", "hang", "boom", "nan"):
        args += ["--only", f"{name}[float32]/numerics"]
    args += ["--only", "good[float32]/determinism", "--only", "mlp[float32]/numerics"]
    started = time.monotonic()
    proc = run_cli(*args)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert time.monotonic() - started < 300
    by_id = results_by_id(load_report(tmp_path))
    for name, (_, message) in FAULTS.items():
        r = by_id[f"{name}[float32]/numerics"]
        assert r["outcome"] == "error", r
        assert message in r["reason"], r["reason"]
    assert "Traceback" in by_id["boom[float32]/numerics"]["details"]
    segv = by_id["segv[float32]/numerics"]["details"]
    assert "Fatal Python error: Segmentation fault" in segv and "faulty.py" in segv  # the crashing line's stack
    nan = by_id["nan[float32]/numerics"]
    assert nan["outcome"] == "failed" and "NaN" in nan["reason"]
    for ok in ("good[float32]/numerics", "good[float32]/determinism", "mlp[float32]/numerics"):
        assert by_id[ok]["outcome"] == "passed", by_id[ok]
    assert "traceback" not in proc.stderr.lower()


def test_killed_run_leaves_finished_checks_on_disk(tmp_path: Path, torch_python: str) -> None:
    cmd = [sys.executable, "-m", "torch_upgrade_check", "run", "--python", torch_python, "--device", "cpu",
           "--out", str(tmp_path), "--python-path", str(FIXTURES), "--workload", "hang=faulty:hang",
           "--workload", "good=faulty:good",  # runs after hang: built-ins first, then user workloads in order
           "--only", "mlp[float32]/numerics", "--only", "hang[float32]/numerics", "--only", "good[float32]/numerics"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 120
    report: dict = {}
    while time.monotonic() < deadline:
        try:
            report = json.loads((tmp_path / "report.json").read_text())
        except (OSError, ValueError):
            report = {}
        if any(r["outcome"] == "passed" for r in report.get("results", [])):
            break
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)  # the CLI only: its worker runs in a process group of its own
    proc.wait()
    time.sleep(3)
    leftover = subprocess.run(["pgrep", "-f", f"torch_upgrade_check.worker {tmp_path}"], check=False, capture_output=True)
    report = load_report(tmp_path)
    by_id = results_by_id(report)
    assert report["complete"] is False
    assert by_id["mlp[float32]/numerics"]["outcome"] == "passed"
    assert by_id["hang[float32]/numerics"]["outcome"] == "not-run"
    assert by_id["good[float32]/numerics"]["outcome"] == "not-run"
    assert leftover.stdout == b"", "the orphaned worker should have killed itself"


@pytest.mark.parametrize("device", ["cuda", "mps"])
def test_unavailable_device_is_a_usage_error(tmp_path: Path, torch_python: str, device: str) -> None:
    proc = run_cli("run", "--python", torch_python, "--device", device, "--out", str(tmp_path))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and f"--device {device} is not usable here: {device} not available" in lines[0]
    assert "--device auto" in lines[0]


@pytest.mark.parametrize("command", [["run", "--python"], ["compare", "--candidate-python"]])
def test_an_interpreter_that_does_not_exist_is_the_teams_input_exit_2(tmp_path: Path, command: list[str]) -> None:
    proc = run_cli(*command, str(tmp_path / "nope" / "python"), "--out", str(tmp_path))
    assert proc.returncode == 2, proc.stderr  # the path given is wrong: not the runner's failure (exit 3)
    (line,) = proc.stderr.strip().splitlines()
    assert line == (f"torch-upgrade-check: error: interpreter {tmp_path / 'nope' / 'python'} not found; pass the path "
                    "of a Python that has torch (or its name on PATH)")


def test_interpreter_without_torch_is_infrastructure(tmp_path: Path) -> None:
    venv.create(tmp_path / "bare", with_pip=False)
    bare = tmp_path / "bare" / "bin" / "python"
    proc = run_cli("run", "--python", str(bare), "--out", str(tmp_path / "out"))
    assert proc.returncode == 3
    assert "is torch installed" in proc.stderr and "No module named 'torch'" in proc.stderr
    assert "Traceback" not in proc.stderr
    report = load_report(tmp_path / "out")
    assert "No module named 'torch'" in report["infra_error"]
    assert (tmp_path / "out" / "junit.xml").is_file()


@pytest.mark.slow
def test_whole_builtin_suite_on_cpu_passes(tmp_path: Path, torch_python: str) -> None:
    proc = run_cli("run", "--device", "cpu", "--python", torch_python, "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = load_report(tmp_path)
    counts: dict[str, int] = {}
    for r in report["results"]:
        counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
    assert counts.get("failed", 0) == 0 and counts.get("error", 0) == 0 and counts.get("not-run", 0) == 0
    aspects = {r["aspect"] for r in report["results"] if r["outcome"] == "passed"}
    assert aspects == {"numerics", "compile", "compile-mode", "dataloader", "determinism", "latency", "memory", "fsdp2",
                       "checkpoint", "training-curve", "sdpa-backends", "amp", "warnings", "export", "jit",
                       "compile-cache", "compiled-latency"}
    assert any(r["workload"].startswith("flex_attention") and r["aspect"] == "compile" and r["outcome"] == "passed"
               for r in report["results"])


def test_list_names_each_check_with_what_its_aspect_costs(torch_python: str) -> None:
    proc = run_cli("run", "--python", torch_python, "--device", "cpu", "--list", "--only", "mlp")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    *rows, footer = proc.stdout.strip().splitlines()
    assert [row.split()[0] for row in rows][:2] == ["mlp[float32]/numerics", "mlp[float32]/cross-backend"]
    assert re.match(r"mlp\[float32\]/numerics +~[0-9.]+ s", rows[0]) and all(len(row.split()) > 1 for row in rows), rows
    assert footer.startswith("# seconds a check, by aspect, measured on a shared 2-core x86_64 CPU with torch 2.13.0")
