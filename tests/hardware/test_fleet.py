"""The fleet the candidate must serve (config key `fleet:`), judged from the wheel's compiled architectures and CUDA
runtime: a dropped architecture fails, naming it, on any runner. Under the emulation the wheel's architecture list
is TUC_EMULATE_ARCHS (torch._C._cuda_getArchFlags), as a CUDA wheel reports it without a GPU."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import load_report, results_by_id, run_cli
from harness import interpreter

from torch_upgrade_check.analysis.fleet import judge, parse_fleet, served_by
from torch_upgrade_check.configfile.read import parse_config
from torch_upgrade_check.errors import UsageError
from torch_upgrade_check.model import Outcome

FLEET = "environment[-]/fleet"
FLEET_MEMORY = "environment[-]/fleet-memory"
CU128_28 = "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120 compute_120"  # torch 2.8's cu128 wheels: sm_50-sm_61 dropped
CU126 = "sm_50 sm_60 sm_61 sm_70 sm_75 sm_80 sm_86 sm_90 compute_90"


def config(tmp_path: Path, archs: str, driver: str = "550.54.15") -> Path:
    path = tmp_path / "torch-upgrade-check.yml"
    path.write_text(f"version: 1\nfleet:\n  archs: [{archs}]\n  driver: {driver}\n")
    return path


def emulated(torch_python: str, folder: Path, archs: str) -> str:
    return str(interpreter(torch_python, folder, emulate="cuda", options={"TUC_EMULATE_ARCHS": archs}))


@pytest.mark.usefixtures("torch_python")
def test_a_candidate_that_dropped_an_architecture_of_the_fleet_fails(tmp_path: Path, torch_python: str) -> None:
    cfg = config(tmp_path, "sm_61, sm_86, sm_90")
    args = ["--config", str(cfg), "--only", "matmul[float32]/numerics", "--no-job-summary", "--device", "auto"]
    proc = run_cli("compare", "--baseline-python", emulated(torch_python, tmp_path / "old", CU126),
                   "--candidate-python", emulated(torch_python, tmp_path / "new", CU128_28),
                   "--out", str(tmp_path / "out"), *args)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    fleet = results_by_id(load_report(tmp_path / "out")["reports"][1])[FLEET]
    assert fleet["outcome"] == "failed" and "no kernels for sm_61" in fleet["reason"]
    assert "sm_86" not in fleet["reason"].split("(the wheel has")[0]  # served by its sm_86 kernels
    proc = run_cli("compare", "--baseline-python", emulated(torch_python, tmp_path / "old", CU126),
                   "--candidate-python", emulated(torch_python, tmp_path / "old", CU126),
                   "--out", str(tmp_path / "aa"), *args)
    assert proc.returncode == 0, proc.stdout[-3000:]
    fleet = results_by_id(load_report(tmp_path / "aa")["reports"][1])[FLEET]
    assert fleet["outcome"] == "passed" and "sm_61 by sm_61 kernels" in fleet["reason"]


@pytest.mark.usefixtures("torch_python")
def test_run_checks_the_fleet_on_a_cpu_runner_from_the_wheel(tmp_path: Path, torch_python: str) -> None:
    """The CPU wheel serves no GPU: skipped, saying how to check it; `--only environment` runs just that."""
    cfg = config(tmp_path, "sm_80")
    proc = run_cli("run", "--python", torch_python, "--config", str(cfg), "--only", "environment", "--device", "cpu",
                   "--out", str(tmp_path / "out"), "--no-job-summary")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]  # nothing passed: nothing ran fails
    fleet = results_by_id(load_report(tmp_path / "out"))[FLEET]
    assert fleet["outcome"] == "skipped" and "build without CUDA" in fleet["reason"]


@pytest.mark.usefixtures("torch_python")
def test_the_fleet_flag_replaces_the_config(tmp_path: Path, torch_python: str) -> None:
    python = emulated(torch_python, tmp_path / "new", CU128_28)
    proc = run_cli("run", "--python", python, "--fleet", "sm_61,sm_90,driver=535.104.05", "--only", "environment",
                   "--config", str(config(tmp_path, "sm_90")), "--out", str(tmp_path / "out"), "--no-job-summary")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    fleet = results_by_id(load_report(tmp_path / "out"))[FLEET]
    assert fleet["outcome"] == "failed" and "no kernels for sm_61" in fleet["reason"]
    assert fleet["repro"].endswith("--fleet sm_61,sm_90,driver=535.104.05")
    proc = run_cli("run", "--python", python, "--fleet", "ampere", "--out", str(tmp_path / "bad"))
    assert proc.returncode == 2 and "--fleet must list GPU architectures" in proc.stderr


def test_which_architectures_a_wheel_serves() -> None:
    flags = CU128_28.split()
    assert served_by("sm_89", flags) == "sm_86 kernels"  # same major, lower minor: binary compatible
    assert served_by("sm_61", flags) == ""
    assert served_by("sm_121", flags) == "sm_120 kernels"
    assert served_by("sm_103", ["sm_90a", "compute_90"]) == "compute_90 PTX, JIT-compiled at first use"
    assert served_by("sm_91", ["sm_90a"]) == ""  # arch-specific kernels run on that architecture only


def test_the_oldest_driver_must_run_the_wheels_cuda() -> None:
    env = {"cuda": "13.0", "cuda_arch_list": CU128_28.split(), "torch_version": "2.10.0+cu130"}
    r = judge(("sm_90",), "550.54.15", env, label="2.10.0+cu130", device="cuda")
    assert r.outcome is Outcome.FAILED and "CUDA 13.0 needs NVIDIA driver 580.65.06 or newer" in r.reason
    r = judge(("sm_90",), "570.86.10", {**env, "cuda": "12.8"}, label="2.8.0+cu128", device="cuda")
    assert r.outcome is Outcome.PASSED and "driver 570.86.10 meets CUDA 12.8's 525.60.13" in r.reason


def test_a_gpu_served_only_by_ptx_needs_the_driver_of_the_wheels_toolkit() -> None:
    """Under CUDA minor-version compatibility a driver older than the wheel's toolkit (but at the major's floor) runs
    the wheel's SASS, yet its JIT cannot compile PTX from a newer toolkit: 'the provided PTX was compiled with an
    unsupported toolchain'. Before this fix the floor alone was checked, and such a fleet passed."""
    env = {"cuda": "12.8", "cuda_arch_list": ["sm_80", "sm_90", "compute_90"], "torch_version": "2.8.0+cu128"}
    r = judge(("sm_90", "sm_100"), "550.54.15", env, label="2.8.0+cu128", device="cuda")
    assert r.outcome is Outcome.FAILED, r.reason
    assert "sm_100 runs this wheel only through its compute_90 PTX" in r.reason, r.reason
    assert "CUDA 12.8's PTX needs NVIDIA driver 570.26 or newer" in r.reason and "550.54.15" in r.reason
    assert r.metrics["ptx_driver"] == "570.26" and r.metrics["jit_only"] == ["sm_100"]
    # every GPU with SASS: the major's minor-version floor is enough
    r = judge(("sm_80", "sm_90"), "550.54.15", env, label="2.8.0+cu128", device="cuda")
    assert r.outcome is Outcome.PASSED, r.reason
    # the toolkit's own driver JIT-compiles its PTX
    r = judge(("sm_100",), "570.86.10", env, label="2.8.0+cu128", device="cuda")
    assert r.outcome is Outcome.PASSED and "570.86.10 JIT-compiles CUDA 12.8's PTX (570.26)" in r.reason, r.reason
    # a toolkit this table does not know: said, not judged
    r = judge(("sm_100",), "550.54.15", {**env, "cuda": "12.11"}, label="x", device="cuda")
    assert r.outcome is Outcome.PASSED and "not judged" in r.reason, r.reason


@pytest.mark.usefixtures("torch_python")
def test_a_fleet_gpu_that_needs_ptx_fails_on_an_older_driver(tmp_path: Path, torch_python: str) -> None:
    """The emulated wheel (CUDA 12.8) has sm_80 and sm_90 kernels and compute_90 PTX: an sm_100 GPU JIT-compiles."""
    python = emulated(torch_python, tmp_path / "py", "sm_80 sm_90 compute_90")
    args = ["run", "--python", python, "--only", "environment", "--no-job-summary"]
    proc = run_cli(*args, "--fleet", "sm_90,sm_100,driver=550.54.15", "--out", str(tmp_path / "old"))
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    fleet = results_by_id(load_report(tmp_path / "old"))[FLEET]
    assert fleet["outcome"] == "failed" and "only through its compute_90 PTX" in fleet["reason"], fleet["reason"]
    proc = run_cli(*args, "--fleet", "sm_90,sm_100,driver=570.86.10", "--out", str(tmp_path / "new"))
    assert results_by_id(load_report(tmp_path / "new"))[FLEET]["outcome"] == "passed", proc.stdout[-3000:]


def test_fleet_config_errors_name_the_fix(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as e:
        parse_config("version: 1\nfleet: {archs: [ampere], driver: new}\n", tmp_path / "c.yml")
    text = " ".join(e.value.problems)
    assert "fleet.archs: each must be a GPU architecture like sm_80" in text
    assert "fleet.driver must be an NVIDIA driver version like 535.104.05" in text
    cfg = parse_config("version: 1\nfleet: {archs: [sm_80, SM_90], driver: 535.104.05}\n", tmp_path / "c.yml")
    assert cfg.fleet is not None and cfg.fleet.archs == ("sm_80", "sm_90") and cfg.fleet.driver == "535.104.05"


@pytest.mark.usefixtures("torch_python")
def test_a_workload_that_does_not_fit_the_fleets_smallest_card_fails_on_a_cuda_runner(tmp_path: Path,
                                                                                     torch_python: str) -> None:
    """Under the CUDA emulation the memory check's peak is torch.cuda.max_memory_allocated after
    reset_peak_memory_stats (the emulation's own allocator count); a card smaller than that peak fails, as memory."""
    python = emulated(torch_python, tmp_path / "gpu", CU128_28)
    args = ["run", "--python", python, "--device", "cuda", "--only", "mlp[float32]/memory", "--no-job-summary"]
    proc = run_cli(*args, "--fleet", "memory=0.1MiB", "--out", str(tmp_path / "small"))
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = load_report(tmp_path / "small")
    judged, measured = results_by_id(report)[FLEET_MEMORY], results_by_id(report)["mlp[float32]/memory"]
    assert (judged["outcome"], judged["device"]) == ("failed", "cuda"), judged
    assert judged["metrics"]["peaks"] == {"mlp[float32]": measured["metrics"]["peak_bytes"]} and measured["metrics"]["peak_bytes"] > 0
    assert "mlp[float32] peaks at" in judged["reason"] and "more than the fleet's smallest card (102.4 KiB) holds" in judged["reason"]
    assert judged["repro"].endswith("--device cuda --only memory --fleet memory=0.1MiB")
    # a memory failure: --fail-on correctness reports it and passes
    assert run_cli(*args, "--fleet", "memory=0.1MiB", "--fail-on", "correctness",
                   "--out", str(tmp_path / "lenient")).returncode == 0
    # A/A: the fleet's card is the emulated H100's 80 GiB
    proc = run_cli(*args, "--fleet", "sm_90, memory=80GiB", "--out", str(tmp_path / "fits"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    judged = results_by_id(load_report(tmp_path / "fits"))[FLEET_MEMORY]
    assert judged["outcome"] == "passed" and "fits the fleet's smallest card (80.0 GiB)" in judged["reason"]


@pytest.mark.usefixtures("torch_python")
def test_compare_judges_the_candidates_memory_peak_against_the_fleets_card(tmp_path: Path, torch_python: str) -> None:
    """In compare the peak is the candidate's A/B median (its memory check's peak_bytes); the baseline never decides."""
    python = emulated(torch_python, tmp_path / "gpu", CU128_28)
    proc = run_cli("compare", "--baseline-python", python, "--candidate-python", python, "--device", "cuda",
                   "--only", "mlp[float32]/memory", "--fleet", "memory=0.1MiB", "--out", str(tmp_path / "out"),
                   "--no-job-summary")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    baseline, candidate = load_report(tmp_path / "out")["reports"]
    judged = results_by_id(candidate)[FLEET_MEMORY]
    assert judged["outcome"] == "failed" and "mlp[float32] peaks at" in judged["reason"], judged
    assert judged["metrics"]["peaks"]["mlp[float32]"] == results_by_id(candidate)["mlp[float32]/memory"]["metrics"]["peak_bytes"]
    assert FLEET_MEMORY not in results_by_id(baseline)
    assert "compare" in judged["repro"] and judged["repro"].endswith("--only memory --fleet memory=0.1MiB")

def test_the_fleets_memory_is_parsed_with_its_unit(tmp_path: Path) -> None:
    assert parse_fleet("sm_80 memory=24GiB", "--fleet") == (("sm_80",), "", 24 * 2**30)
    assert parse_fleet("memory=16GB", "--fleet") == ((), "", 16 * 10**9)
    with pytest.raises(UsageError) as e:
        parse_fleet("memory=lots", "--fleet")
    assert "'memory=lots' is none of them" in e.value.problems[0]
    cfg = parse_config("version: 1\nfleet: {archs: [sm_80], memory: 24 GiB}\n", tmp_path / "c.yml")
    assert cfg.fleet is not None and cfg.fleet.memory == 24 * 2**30
    with pytest.raises(UsageError) as e:
        parse_config("version: 1\nfleet: {memory: 24}\n", tmp_path / "c.yml")
    assert "fleet.memory must be the smallest card's memory like 24GiB or 16GB, got" in " ".join(e.value.problems)
