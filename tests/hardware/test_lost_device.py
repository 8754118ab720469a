"""A candidate that lost the accelerator fails; `auto` never quietly means the CPU where an accelerator is expected.

Before this fix, `compare --device auto` resolved the device from the candidate's probe alone: with the
baseline on (emulated) CUDA and a candidate that cannot use CUDA, both sides ran on the CPU and the
comparison PASSED; `run --device auto` on a machine with an NVIDIA driver, under a torch that sees no CUDA,
ran on the CPU as well, and the summary's "requested X, ran on Y" line never fired for auto.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import load_report, results_by_id, run_cli
from harness import interpreter

from torch_upgrade_check.errors import UsageError
from torch_upgrade_check.model import Outcome, Report
from torch_upgrade_check.orchestrate.device_choice import Host, choose, host_accelerator, nvidia_driver
from torch_upgrade_check.report import device_mismatch

CHECK = "mlp[float32]/numerics"
LOST = "environment[-]/device"
OK = (True, "probe kernel ran and matched")
CPU_WHEEL = (False, "cuda not available: torch built without CUDA (a CPU-only wheel)")
NO_MPS = (False, "mps not available: torch built without MPS")


def compare(baseline: str, candidate: str, out: Path, *extra: str) -> tuple[int, dict, dict]:
    proc = run_cli("compare", "--baseline-python", baseline, "--candidate-python", candidate, "--device", "auto",
                   "--only", CHECK, "--out", str(out), "--no-job-summary", "--timeout", "300", *extra)
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = load_report(out)
    return proc.returncode, doc["reports"][0], doc["reports"][1]


@pytest.mark.usefixtures("torch_python")
def test_a_candidate_that_lost_cuda_fails_compare(tmp_path: Path, torch_python: str) -> None:
    baseline = str(interpreter(torch_python, tmp_path / "cuda", emulate="cuda"))
    code, base, cand = compare(baseline, torch_python, tmp_path / "out")
    assert code == 1
    lost = results_by_id(cand)[LOST]
    assert lost["outcome"] == "failed"
    assert "cannot use cuda (cuda not available: torch built without CUDA" in lost["reason"]
    assert "although the baseline torch could use it" in lost["reason"]
    assert cand["device"] == base["device"] == "cpu"  # both sides on the CPU, and loudly so
    assert results_by_id(cand)[CHECK]["outcome"] == "passed"  # the rest still ran, on the CPU
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert r"auto \(cuda\) was requested but the checks ran on cpu" in summary and "1 device failure" in summary


@pytest.mark.usefixtures("torch_python")
def test_an_aa_with_both_on_emulated_cuda_runs_there_and_passes(tmp_path: Path, torch_python: str) -> None:
    python = str(interpreter(torch_python, tmp_path / "cuda", emulate="cuda"))
    code, base, cand = compare(python, python, tmp_path / "out")
    assert code == 0
    assert base["device"] == cand["device"] == "cuda" and LOST not in results_by_id(cand)
    assert cand["environment"]["device_choice"] == {"requested": "auto", "expected": "cuda", "ran_on": "cuda"}
    assert "was requested but the checks ran on" not in (tmp_path / "out" / "summary.md").read_text()


@pytest.mark.usefixtures("torch_python")
def test_run_auto_on_a_machine_with_an_nvidia_driver_and_no_cuda_torch_fails(tmp_path: Path, torch_python: str) -> None:
    """The machine's driver is seen without torch (nvidia-smi on PATH); the CPU torch here cannot use it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 550.54.15\n")
    smi.chmod(0o755)
    env = {"PATH": f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin"}
    args = ["run", "--python", torch_python, "--only", CHECK, "--no-job-summary"]
    proc = run_cli(*args, "--device", "auto", "--out", str(tmp_path / "auto"), env=env)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    lost = results_by_id(load_report(tmp_path / "auto"))[LOST]
    assert lost["outcome"] == "failed"
    assert "although this machine has an NVIDIA driver (550.54.15)" in lost["reason"]
    assert "--device cpu" in lost["reason"]
    proc = run_cli(*args, "--device", "cpu", "--out", str(tmp_path / "cpu"), env=env)
    assert proc.returncode == 0, proc.stdout[-3000:]  # the opt-out
    assert LOST not in results_by_id(load_report(tmp_path / "cpu"))


def test_auto_is_the_accelerator_either_side_or_the_machine_can_use() -> None:
    cuda = {"cuda": OK, "mps": NO_MPS}
    cpu = {"cuda": CPU_WHEEL, "mps": NO_MPS}
    mac = Host("mps", "this machine is an Apple-silicon Mac")
    assert choose("auto", {"baseline": cuda, "candidate": cuda}, None).device == "cuda"
    assert choose("auto", {"baseline": cpu, "candidate": cpu}, None).device == "cpu"
    lost = choose("auto", {"baseline": cuda, "candidate": cpu}, None, label="2.14.0")
    assert (lost.device, lost.expected) == ("cpu", "cuda")
    assert lost.lost.startswith("the candidate torch 2.14.0 cannot use cuda (cuda not available: torch built without")
    assert lost.result("repro").outcome is Outcome.FAILED and lost.result("repro").fail_kind == "correctness"
    on_mac = choose("auto", {"candidate": cpu}, mac)
    assert on_mac.expected == "mps" and "although this machine is an Apple-silicon Mac" in on_mac.lost
    assert choose("cpu", {"candidate": cpu}, mac).result("") is None  # the opt-out
    gained = choose("auto", {"baseline": cpu, "candidate": cuda}, None)
    assert gained.device == "cpu" and not gained.lost and "the baseline torch cannot use cuda" in gained.note
    with pytest.raises(UsageError, match="--device cuda is not usable here"):
        choose("cuda", {"candidate": cpu}, None)
    assert choose("cuda", {"baseline": cuda, "candidate": cpu}, None).lost  # named, and the baseline could
    assert choose("cuda", {"candidate": cpu}, Host("cuda", "this machine has an NVIDIA driver")).lost


def test_the_summary_says_what_auto_stood_for() -> None:
    def report(requested: str, device: str, expected: str) -> Report:
        return Report("0", device, requested, "2.13.0", [], "", environment={"device_choice": {"expected": expected}})

    assert device_mismatch(report("auto", "cpu", "cuda")) == ("auto (cuda)", "cpu")
    assert device_mismatch(report("auto", "cuda", "cuda")) is None
    assert device_mismatch(report("auto", "cpu", "cpu")) is None
    assert device_mismatch(report("mps", "cpu", "")) == ("mps", "cpu")


def test_the_machine_is_seen_without_torch(tmp_path: Path) -> None:
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 535.104.05\n")
    smi.chmod(0o755)
    assert host_accelerator({"PATH": str(tmp_path)}) == Host("cuda", "this machine has an NVIDIA driver (535.104.05)")


def failing_smi(folder: Path) -> Path:
    """nvidia-smi installed where no driver runs (a container image with nvidia-utils, a machine whose driver is not
    loaded): it prints its complaint on stdout and exits 9, as the real one does."""
    folder.mkdir(parents=True, exist_ok=True)
    smi = folder / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
                   "Make sure that the latest NVIDIA driver is installed and running.\"\nexit 9\n")
    smi.chmod(0o755)
    return folder


def test_an_nvidia_smi_that_fails_is_no_gpu(tmp_path: Path) -> None:
    path = {"PATH": str(failing_smi(tmp_path / "bin"))}
    assert nvidia_driver(path, proc=tmp_path / "no-proc-file") == ""
    assert getattr(host_accelerator(path), "device", None) != "cuda"  # (an Apple-silicon Mac is still "mps")
    # the loaded kernel module still says a driver is there when nvidia-smi itself fails
    (tmp_path / "version").write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 2024\n")
    assert nvidia_driver(path, proc=tmp_path / "version") == "550.54.15"


@pytest.mark.usefixtures("torch_python")
def test_the_workers_driver_is_not_a_failing_nvidia_smis_complaint(tmp_path: Path, torch_python: str) -> None:
    python = str(interpreter(torch_python, tmp_path / "cuda", emulate="cuda"))
    env = {"PATH": f"{failing_smi(tmp_path / 'bin')}:{Path(sys.executable).parent}:/usr/bin:/bin"}
    proc = run_cli("run", "--python", python, "--device", "cuda", "--only", "matmul[float32]/numerics",
                   "--out", str(tmp_path / "out"), "--no-job-summary", env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert load_report(tmp_path / "out")["environment"]["driver"] is None
