"""Peak memory of a region, with the API each backend has; the API used is recorded with the number."""

from __future__ import annotations

from types import TracebackType

import torch


def warm_up(device: str) -> None:
    """Pay the measuring API's first-use cost now: the CPU profiler takes seconds to start in a new process
    (2.5 s here), which compare's A/B workers pay before they are pinned to their shared CPU, in parallel."""
    with PeakMemory(device):
        torch.ones(8, device=device).sum()


class PeakMemory:
    """Context manager: `bytes` is the peak growth during the block, `api` names how it was measured.

    CUDA: torch.cuda.max_memory_allocated after reset_peak_memory_stats (exact, allocator level).
    MPS: torch.mps.driver_allocated_memory growth (MPS exposes no peak counter; a lower bound).
    CPU: torch.profiler with profile_memory; the running sum, in time order, of the bytes each op
    allocated and freed peaks at the live tensor bytes (op granularity; the allocator's cache and
    the process's RSS are not counted, so small workloads show their own footprint).
    """

    def __init__(self, device: str) -> None:
        self.device = device
        self.bytes = 0
        self.api = ""
        self._start = 0
        self._prof: torch.profiler.profile | None = None

    def __enter__(self) -> PeakMemory:
        if self.device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self._start = torch.cuda.memory_allocated()
            self.api = "torch.cuda.max_memory_allocated"
        elif self.device == "mps":
            torch.mps.synchronize()
            self._start = torch.mps.driver_allocated_memory()
            self.api = "torch.mps.driver_allocated_memory (growth; MPS has no peak counter)"
        else:
            self._prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True)
            self._prof.__enter__()
            self.api = "torch.profiler profile_memory (live tensor bytes, op granularity)"
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self.device == "cuda":
            torch.cuda.synchronize()
            self.bytes = max(0, torch.cuda.max_memory_allocated() - self._start)
        elif self.device == "mps":
            torch.mps.synchronize()
            self.bytes = max(0, torch.mps.driver_allocated_memory() - self._start)
        elif self._prof is not None:
            self._prof.__exit__(exc_type, exc, tb)
            events = sorted((e for e in self._prof.events() if e.self_cpu_memory_usage),
                            key=lambda e: e.time_range.start)
            live = peak = 0
            for e in events:
                live += e.self_cpu_memory_usage
                peak = max(peak, live)
            self.bytes = peak
