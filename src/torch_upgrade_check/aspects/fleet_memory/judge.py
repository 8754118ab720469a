"""The fleet-memory aspect's typed metrics and rule (pure), decided from a finished report (Runs.REPORT).

The fleet's smallest card (`memory=24GiB`) is judged on a CUDA runner only, after the checks ran: each
workload's peak device memory (its `memory` check's `peak_bytes`, torch.cuda.max_memory_allocated counted from
before the workload was built: its weights and inputs count) must fit in it (`environment[-]/fleet-memory`).
The peak is the allocator's, without the CUDA context and the cache's
fragmentation, so a workload that fits here by a hair may still not fit on the card: the rule is a floor.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from torch_upgrade_check.analysis.verdicts import format_bytes
from torch_upgrade_check.aspects._metrics import Recorded
from torch_upgrade_check.model import CheckResult, Outcome

WORKLOAD, DTYPE, ASPECT = "environment", "-", "fleet-memory"
JUDGED = "memory"  # the aspect whose peaks it judges: its repro command reruns those checks (--only memory)


@dataclass(frozen=True)
class Metrics(Recorded):
    """The fleet-memory result's metrics (judge_report writes them): the card, each workload's peak, those over it and
    those whose memory check measured no peak."""

    fleet_memory_bytes: int | None = None
    peaks: Mapping[str, float] | None = None  # "mlp[float32]" -> its memory check's peak_bytes
    over: Sequence[str] | None = None
    unmeasured: Sequence[str] | None = None


def judge_report(memory: int, results: Sequence[CheckResult], *, device: str, label: str,
                 repro: str = "") -> CheckResult:
    """`environment[-]/fleet-memory`: failed when a workload's peak device memory (its memory check) exceeds the
    fleet's smallest card, naming workload, peak and card; skipped off CUDA (no device peak to judge) or when no
    memory check measured a peak. Fails as `memory` (--fail-on)."""
    card = format_bytes(memory)

    def result(outcome: Outcome, reason: str, **metrics: Any) -> CheckResult:
        return CheckResult(WORKLOAD, ASPECT, device, DTYPE, outcome, reason=reason, repro=repro,
                           metrics={"fleet_memory_bytes": memory, **metrics})

    if device != "cuda":
        return result(Outcome.SKIPPED, f"the checks ran on {device}: the peak memory of each workload is judged "
                                       f"against the fleet's smallest card ({card}) on a CUDA runner")
    peaks = {f"{r.workload}[{r.dtype}]": float(r.metrics["peak_bytes"]) for r in results
             if r.aspect == JUDGED and r.device == "cuda" and r.outcome is not Outcome.ERROR
             and isinstance(r.metrics.get("peak_bytes"), (int, float))}
    unmeasured = sorted(f"{r.workload}[{r.dtype}]" for r in results
                        if r.aspect == JUDGED and r.device == "cuda" and f"{r.workload}[{r.dtype}]" not in peaks)
    if not peaks and unmeasured:  # each ran and none finished: out of memory on the runner's own card, likeliest
        return result(Outcome.SUSPICIOUS, f"no peak was measured for {', '.join(unmeasured)} (its memory check did "
                                          f"not finish), so none is judged against the fleet's smallest card "
                                          f"({card})", peaks={}, over=[], unmeasured=unmeasured)
    if not peaks:
        return result(Outcome.SKIPPED, f"no memory check measured a peak on cuda (torch {label}): run the workloads' "
                                       f"memory checks to judge them against the fleet's smallest card ({card})")
    over = {w: b for w, b in peaks.items() if b > memory}
    metrics = {"peaks": peaks, "over": sorted(over), "unmeasured": unmeasured}
    if over:
        named = "; ".join(f"{w} peaks at {format_bytes(b)}" for w, b in sorted(over.items(), key=lambda e: -e[1]))
        return result(Outcome.FAILED, f"torch {label}: {named}, more than the fleet's smallest card ({card}) "
                                      "holds", **metrics)
    top, peak = max(peaks.items(), key=lambda e: e[1])
    if unmeasured:  # an out-of-memory error is the likeliest reason: never "every workload fits"
        return result(Outcome.SUSPICIOUS, f"no peak was measured for {', '.join(unmeasured)} (its memory check did "
                                          f"not finish), so it is not judged against the fleet's smallest card "
                                          f"({card}); the others fit, the largest peak is {top}'s "
                                          f"{format_bytes(peak)}", **metrics)
    return result(Outcome.PASSED, f"every workload fits the fleet's smallest card ({card}); the largest peak is "
                                  f"{top}'s {format_bytes(peak)}", **metrics)
