"""A workload's device memory is its absolute peak: the weights and inputs already on the device count.

Before this fix the memory check read torch.cuda.max_memory_allocated minus what was allocated when the call
started, so the weights (built before the call) never counted: `fleet-memory` said 16 MiB of frozen weights "fit"
an 8 MiB card, and a torch that keeps a larger persistent buffer (a weight cache made at the first forward) was
`unchanged` in compare's memory A/B, whose warm-up round made the buffer before any timed round started.
The workload here is 16 MiB of frozen weights and 8 KiB of activations: forward only, no gradients.
"""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest
from conftest import load_report, results_by_id, run_cli
from harness import interpreter

pytestmark = pytest.mark.usefixtures("torch_python")
CHECK = "frozen[float32]/memory"
FLEET_MEMORY = "environment[-]/fleet-memory"
WEIGHTS = 2048 * 2048 * 4 + 2048 * 4  # nn.Linear(2048, 2048): weight and bias, float32
FACTORY = """
import torch


def build(device, dtype):
    model = torch.nn.Linear(2048, 2048, device=device, dtype=dtype).requires_grad_(False)
    return model, torch.randn(1, 2048, device=device, dtype=dtype)
"""


def workload(tmp_path: Path) -> list[str]:
    (tmp_path / "frozen_weights.py").write_text(FACTORY)
    return ["--python-path", str(tmp_path), "--workload", "frozen=frozen_weights:build", "--only", CHECK]


def emulated_cuda(torch_python: str, folder: Path, breaks: tuple[str, ...] = (), **options: str) -> str:
    return str(interpreter(torch_python, folder, emulate="cuda", breaks=breaks,
                           options={f"TUC_EMULATE_{k.upper()}": v for k, v in options.items()}))


def test_the_emulated_card_refuses_what_it_cannot_hold(tmp_path: Path, torch_python: str) -> None:
    """The oracle: the caching allocator raises torch.OutOfMemoryError past the card's memory, allocates nothing for
    the failed request, and max_memory_allocated after reset_peak_memory_stats starts at what is allocated."""
    script = textwrap.dedent("""
        import json, torch
        held = torch.empty(2 * 2**20, device="cuda")  # 8 MiB
        out = {"total": torch.cuda.get_device_properties(0).total_memory}
        try:
            torch.empty(4 * 2**20, device="cuda")  # 16 MiB more: 24 of 16
            out["error"] = "none"
        except torch.OutOfMemoryError as e:
            out["error"] = str(e)
        out["allocated"] = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        out["peak_after_reset"] = torch.cuda.max_memory_allocated()
        print(json.dumps(out))
    """)
    python = emulated_cuda(torch_python, tmp_path / "py", memory_mib="16")
    proc = subprocess.run([python, "-c", script], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["total"] == 16 * 2**20
    assert out["error"].startswith("CUDA out of memory. Tried to allocate 16.00 MiB. GPU 0 has a total capacity of "
                                   "16.00 MiB"), out["error"]
    assert out["allocated"] == out["peak_after_reset"] == 8 * 2**20


def test_fleet_memory_fails_a_card_smaller_than_the_weights(tmp_path: Path, torch_python: str) -> None:
    python = emulated_cuda(torch_python, tmp_path / "py")
    args = ["run", "--python", python, "--device", "cuda", "--no-job-summary", *workload(tmp_path)]
    proc = run_cli(*args, "--fleet", "memory=8MiB", "--out", str(tmp_path / "small"))
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    by_id = results_by_id(load_report(tmp_path / "small"))
    peak = by_id[CHECK]["metrics"]["peak_bytes"]
    assert WEIGHTS < peak < WEIGHTS + 2**20, peak  # the weights and the input on the device, then 8 KiB of output
    assert by_id[CHECK]["metrics"]["resident_bytes"] == WEIGHTS + 2048 * 4  # held before the call: weights, input
    judged = by_id[FLEET_MEMORY]
    assert judged["outcome"] == "failed" and "frozen[float32] peaks at 16.0 MiB" in judged["reason"], judged["reason"]
    # A/A: a card that holds it passes
    proc = run_cli(*args, "--fleet", "memory=24MiB", "--out", str(tmp_path / "fits"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert results_by_id(load_report(tmp_path / "fits"))[FLEET_MEMORY]["outcome"] == "passed"


def test_a_runner_card_smaller_than_the_weights_runs_out_of_memory(tmp_path: Path, torch_python: str) -> None:
    """On the runner's own card, as torch enforces it: building the workload fails with CUDA's out-of-memory error,
    and fleet-memory never says it fits."""
    python = emulated_cuda(torch_python, tmp_path / "py", memory_mib="8")
    proc = run_cli("run", "--python", python, "--device", "cuda", "--no-job-summary", *workload(tmp_path),
                   "--fleet", "memory=24MiB", "--out", str(tmp_path / "out"))
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    by_id = results_by_id(load_report(tmp_path / "out"))
    assert by_id[CHECK]["outcome"] == "error" and "CUDA out of memory" in by_id[CHECK]["reason"], by_id[CHECK]
    assert by_id[FLEET_MEMORY]["outcome"] == "suspicious"


def test_a_warm_ab_worker_counts_its_workloads_memory_alone(tmp_path: Path, torch_python: str) -> None:
    """compare's A/B workers keep every workload's instance between rounds: a memory round counts the weights of
    its own workload, never another's still cached, however the rounds of the checks interleave."""
    (tmp_path / "frozen_weights.py").write_text(FACTORY)
    script = textwrap.dedent("""
        import json, sys
        from torch_upgrade_check.model import CheckSpec
        from torch_upgrade_check.worker import checks
        cache, peaks = {}, []
        fast = {"samples": 1, "warmup": 0, "inner": 1}
        frozen = dict(workload="frozen", device="cuda", dtype="float32", factory="frozen_weights:build")
        for aspect, spec in (("latency", frozen), ("latency", dict(workload="mlp", device="cuda", dtype="float32")),
                             ("memory", frozen), ("memory", frozen),
                             ("latency", dict(workload="cnn", device="cuda", dtype="float32")), ("memory", frozen)):
            metrics = checks.run(CheckSpec(aspect=aspect, params=fast if aspect == "latency" else {}, **spec), cache)
            if aspect == "memory":
                peaks.append(metrics["peak_bytes"])
        print(json.dumps(peaks))
    """)
    python = emulated_cuda(torch_python, tmp_path / "py")
    proc = subprocess.run([python, "-c", script], capture_output=True, text=True, timeout=300, check=False,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    peaks = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(set(peaks)) == 1 and WEIGHTS < peaks[0] < WEIGHTS + 2**20, peaks


@pytest.mark.serial  # A/B memory measurements whose verdicts (a regression, an A/A) are asserted: run alone
def test_the_memory_ab_sees_a_larger_persistent_buffer(tmp_path: Path, torch_python: str) -> None:
    base = emulated_cuda(torch_python, tmp_path / "base")
    broken = emulated_cuda(torch_python, tmp_path / "broken", breaks=("linear-keeps-weight-copy",))

    def compare(candidate: str, out: Path) -> tuple[int, dict]:
        proc = run_cli("compare", "--baseline-python", base, "--candidate-python", candidate, "--device", "cuda",
                       "--no-job-summary", "--out", str(out), *workload(tmp_path))
        assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
        return proc.returncode, results_by_id(load_report(out)["reports"][1])[CHECK]

    code, cand = compare(broken, tmp_path / "broken-out")
    assert code == 1 and cand["outcome"] == "failed", cand["reason"]
    # a loaded machine may fit fewer than the 4 pairs a regression needs in the budget: undecided, and failing
    assert cand["metrics"]["change"] in ("regression", "undecided") and "peak memory 1.99× more" in cand["reason"]
    assert cand["metrics"]["peak_bytes"] > 2 * WEIGHTS > cand["metrics"]["baseline_peak_bytes"] > WEIGHTS
    code, cand = compare(base, tmp_path / "aa-out")
    assert code == 0 and cand["outcome"] == "passed" and cand["metrics"]["change"] == "unchanged", cand["reason"]
