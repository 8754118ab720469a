"""The fleet-memory rule (aspects.fleet_memory.judge, decided from a finished report): each workload's peak device
memory against the fleet's smallest card, on CUDA only; a memory check that measured no peak is never "fits"
(end to end, under the CUDA emulation: tests/hardware/test_fleet.py)."""

from __future__ import annotations

from torch_upgrade_check.aspects.fleet_memory.judge import judge_report as judge_memory
from torch_upgrade_check.model import CheckResult, Outcome


def test_fleet_memory_is_judged_on_cuda_only() -> None:
    peak = CheckResult("cnn", "memory", "cuda", "float16", Outcome.PASSED, metrics={"peak_bytes": 30 * 2**30})
    r = judge_memory(24 * 2**30, [peak], device="cuda", label="2.13.0+cu128")
    assert r.outcome is Outcome.FAILED and r.fail_kind == "memory" and "cnn[float16] peaks at 30.0 GiB" in r.reason
    r = judge_memory(24 * 2**30, [peak], device="mps", label="2.13.0")
    assert r.outcome is Outcome.SKIPPED and "judged against the fleet's smallest card (24.0 GiB) on a CUDA runner" in r.reason
    assert judge_memory(24 * 2**30, [], device="cuda", label="x").outcome is Outcome.SKIPPED
    # a memory check that ran out of memory measured no peak: never "every workload fits"
    small = CheckResult("mlp", "memory", "cuda", "float32", Outcome.PASSED, metrics={"peak_bytes": 2**30})
    oom = CheckResult("llm", "memory", "cuda", "float16", Outcome.ERROR, reason="OutOfMemoryError: CUDA out of memory")
    r = judge_memory(24 * 2**30, [small, oom], device="cuda", label="x")
    assert r.outcome is Outcome.SUSPICIOUS and "no peak was measured for llm[float16]" in r.reason, r.reason
    assert judge_memory(24 * 2**30, [small], device="cuda", label="x").outcome is Outcome.PASSED
    r = judge_memory(24 * 2**30, [oom], device="cuda", label="x")  # none finished: not "run the memory checks"
    assert r.outcome is Outcome.SUSPICIOUS and "no peak was measured for llm[float16]" in r.reason, r.reason
