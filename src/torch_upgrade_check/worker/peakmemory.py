"""How far a device's allocated bytes rose during a block: CUDA's own peak counter, MPS's live counter read after
every op, the CPU's allocations summed in time order from the profiler (devices.Device.peak_memory picks one)."""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any, Protocol

import torch


class Synced(Protocol):
    """What a meter asks of its device (devices.Device): its counter's name, and a synchronise around the block."""

    memory_counter: str

    def synchronize(self) -> None: ...


class PeakMemory:
    """Context manager: `bytes` is how far the device's allocated bytes rose above `since` at their highest during
    the block (from where they were at its start when `since` is None: its growth alone), `api` names the counter
    used; `resident` is what was already held above `since` when the block started (None: not counted).

    Counted from `since`, the bytes allocated before the workload was built, the peak is the workload's own:
    its weights, inputs and what torch keeps for it (a weight cache made at the first call), which a growth
    from the block's start leaves out, and not what other workloads or earlier checks hold.
    """

    def __init__(self, device: Synced, since: int | None = None) -> None:
        self.device = device
        self.api = device.memory_counter
        self.bytes = 0
        self.since = since
        self.resident: int | None = None

    def __enter__(self) -> PeakMemory:
        self.device.synchronize()
        self._start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.device.synchronize()
        self.bytes = max(0, int(self._stop(exc_type, exc, tb)))

    def _start(self) -> None:
        raise NotImplementedError

    def _stop(self, exc_type: Any, exc: Any, tb: Any) -> int:
        raise NotImplementedError


class CudaPeak(PeakMemory):
    def _start(self) -> None:
        torch.cuda.reset_peak_memory_stats()  # the peak restarts at what is allocated now, not at 0
        now = torch.cuda.memory_allocated()
        self._base = now if self.since is None else self.since
        self.resident = None if self.since is None else max(0, now - self.since)

    def _stop(self, *exc: Any) -> int:
        return torch.cuda.max_memory_allocated() - self._base


class SampledPeak(PeakMemory):
    """Live bytes read after every op (a dispatch mode), for backends with a live counter but no peak."""

    def __init__(self, device: Synced, live: Callable[[], int], since: int | None = None) -> None:
        super().__init__(device, since)
        self._live = live

    def _start(self) -> None:
        from torch.utils._python_dispatch import TorchDispatchMode

        live, state = self._live, {"peak": self._live()}
        self._base = state["peak"] if self.since is None else self.since
        self.resident = None if self.since is None else max(0, state["peak"] - self.since)
        self._state = state

        class Sampler(TorchDispatchMode):
            supports_higher_order_operators = True  # FlexAttention is one: run it, then read the counter

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                state["peak"] = max(state["peak"], live())
                return out

        self._mode = Sampler()
        self._mode.__enter__()

    def _stop(self, *exc: Any) -> int:
        self._mode.__exit__(*exc)
        return max(self._state["peak"], self._live()) - self._base


class ProfilerPeak(PeakMemory):
    """The running sum, in time order, of the bytes each op allocated and freed (torch.profiler)."""

    def _start(self) -> None:
        self._prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True)
        self._prof.__enter__()

    def _stop(self, *exc: Any) -> int:
        self._prof.__exit__(*exc)
        events = sorted((e for e in self._prof.events() if e.self_cpu_memory_usage), key=lambda e: e.time_range.start)
        live = peak = 0
        for e in events:
            live += e.self_cpu_memory_usage
            peak = max(peak, live)
        return peak
