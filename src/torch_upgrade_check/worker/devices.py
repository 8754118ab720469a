"""Everything that differs between CPU, CUDA and MPS, in one small object per device.

The aspects never branch on the device name; they ask the device object: synchronise, measure peak
memory, set the float32 precision and the deterministic algorithms, probe what FlexAttention can
do here, describe the hardware. A reader sees each backend's limits in one place (as PyTorch's
own device-generic tests keep them in per-device classes), and the tests' emulated CUDA and MPS
backends (tests/harness) exercise exactly this code on the CPU.

Transfers to the host go through `tensors.host` (move to the CPU first, convert there): MPS has no
float64, and converting an MPS tensor straight to CPU float64 raises or, in some versions,
silently returns zeros.
"""

from __future__ import annotations

import contextlib
import functools
import platform
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from torch_upgrade_check.worker import first_line, peakmemory, precision

# "tf32" is float32 tensors computed with TF32 tensor-core math: a variant of its own (CUDA only).
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
          "float64": torch.float64, "tf32": torch.float32}


@dataclass(frozen=True)
class Support:
    """Whether a feature runs here, and torch's own words when it does not."""

    ok: bool
    reason: str = ""


@dataclass(frozen=True)
class ProcessGroup:
    """How FSDP2 or DDP runs here: the process-group backend and the number of ranks, or why it cannot."""

    ok: bool
    reason: str = ""
    backend: str = ""
    world: int = 0


class Device:
    """The CPU, and the defaults every device shares."""

    name = "cpu"
    memory_counter = "torch.profiler profile_memory (live tensor bytes, op granularity)"

    def synchronize(self) -> None:
        """Wait for queued kernels; every timed region and every memory reading is bracketed by this."""

    def peak_memory(self, since: int | None = None) -> peakmemory.PeakMemory:
        """The peak of a block, counted from `since` (the bytes allocated before the workload was built) where the
        device has a live counter; the CPU's profiler sees only what the block itself allocates."""
        return peakmemory.ProfilerPeak(self)

    def allocated(self) -> int | None:
        """Bytes the device's allocator holds for live tensors now; None without such a counter (the CPU)."""
        return None

    @contextlib.contextmanager
    def precision(self, dtype_name: str) -> Iterator[dict[str, str]]:
        """float32 math as IEEE float32 (no TF32) unless `dtype_name` is "tf32"; yields the flags in use."""
        yield {}

    @contextlib.contextmanager
    def deterministic(self) -> Iterator[None]:
        before = torch.are_deterministic_algorithms_enabled()
        torch.use_deterministic_algorithms(True)
        try:
            yield
        finally:
            torch.use_deterministic_algorithms(before)

    def rng_states(self) -> dict[str, Any]:
        """What a training job saves to resume with the same random numbers: the CPU generator's state and the
        device's own (every GPU's on CUDA)."""
        return {"cpu": torch.get_rng_state()}

    def set_rng_states(self, states: dict[str, Any]) -> None:
        torch.set_rng_state(states["cpu"])

    def supports_dtype(self, dtype_name: str) -> Support:
        if dtype_name == "tf32":
            return Support(False, "TF32 is a CUDA tensor-core format (compute capability 8.0 or newer)")
        return Support(True)

    def capability(self) -> str | None:
        return None

    def describe(self) -> dict[str, Any]:
        return {}

    def process_group(self, what: str = "FSDP2") -> ProcessGroup:
        return ProcessGroup(True, backend="gloo", world=2)  # two CPU ranks on this machine

    def rank_device(self, rank: int) -> str:
        """The torch device a rank of a process group uses (CUDA: one GPU per rank)."""
        return self.name

    def pin_memory(self) -> Support:
        """Whether a DataLoader's pin_memory=True pins batches here (page-locked host memory, for copies to the
        device): the dataloader aspect turns it on where it does."""
        return Support(False, "the CPU has no pinned memory to copy from (pin_memory serves an accelerator)")

    @functools.cached_property
    def flex(self) -> dict[str, Support]:
        """What FlexAttention does on this device with the torch under test, found by running it."""
        return {"forward": _probe_flex(self.name, backward=False), "backward": _probe_flex(self.name, backward=True)}


class CUDA(Device):
    name = "cuda"
    memory_counter = "torch.cuda.max_memory_allocated (allocator peak, exact; weights and inputs included)"

    def synchronize(self) -> None:
        torch.cuda.synchronize()

    def rng_states(self) -> dict[str, Any]:
        return {**super().rng_states(), "cuda": torch.cuda.get_rng_state_all()}

    def set_rng_states(self, states: dict[str, Any]) -> None:
        super().set_rng_states(states)
        torch.cuda.set_rng_state_all(states["cuda"])

    def peak_memory(self, since: int | None = None) -> peakmemory.PeakMemory:
        return peakmemory.CudaPeak(self, since)

    def allocated(self) -> int | None:
        return int(torch.cuda.memory_allocated())

    @contextlib.contextmanager
    def precision(self, dtype_name: str) -> Iterator[dict[str, str]]:
        saved = precision.save_fp32_precision()
        try:
            precision.set_fp32_precision("tf32" if dtype_name == "tf32" else "ieee")
            yield precision.get_fp32_precision()
        finally:
            precision.restore_fp32_precision(saved)

    @contextlib.contextmanager
    def deterministic(self) -> Iterator[None]:
        # cuBLAS reads CUBLAS_WORKSPACE_CONFIG when CUDA starts: the worker sets it before importing torch.
        flags = (torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark)
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False
        try:
            with super().deterministic():
                yield
        finally:
            torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = flags

    def supports_dtype(self, dtype_name: str) -> Support:
        if dtype_name == "tf32" and torch.cuda.get_device_capability()[0] < 8:
            return Support(False, f"TF32 needs compute capability 8.0 or newer; this GPU is {self.capability()}")
        return Support(True)

    def capability(self) -> str | None:
        major, minor = torch.cuda.get_device_capability()
        return f"sm{major}{minor}"

    def process_group(self, what: str = "FSDP2") -> ProcessGroup:
        count = torch.cuda.device_count()
        if count < 2:
            return ProcessGroup(False, f"{what} over NCCL needs 2 or more GPUs; {count} present")
        return ProcessGroup(True, backend="nccl", world=min(count, 8))

    def rank_device(self, rank: int) -> str:
        torch.cuda.set_device(rank)
        return f"cuda:{rank}"

    def pin_memory(self) -> Support:
        return Support(True)

    def describe(self) -> dict[str, Any]:
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        return {"gpu": str(props.name), "compute_capability": self.capability(),
                "gpu_memory_gib": round(getattr(props, "total_memory", 0) / 2**30, 1),
                "cuda_runtime": torch.version.cuda, "fp32_precision_default": precision.raw(precision.get_fp32_precision)}


class MPS(Device):
    name = "mps"
    memory_counter = ("torch.mps.current_allocated_memory sampled after every op (live tensor bytes, op "
                      "granularity; MPS has no peak counter; weights and inputs included)")

    def synchronize(self) -> None:
        torch.mps.synchronize()

    def rng_states(self) -> dict[str, Any]:
        return {**super().rng_states(), "mps": torch.mps.get_rng_state()}

    def set_rng_states(self, states: dict[str, Any]) -> None:
        super().set_rng_states(states)
        torch.mps.set_rng_state(states["mps"])

    def peak_memory(self, since: int | None = None) -> peakmemory.PeakMemory:
        return peakmemory.SampledPeak(self, torch.mps.current_allocated_memory, since)

    def allocated(self) -> int | None:
        return int(torch.mps.current_allocated_memory())

    def supports_dtype(self, dtype_name: str) -> Support:
        if dtype_name == "float64":
            return Support(False, "MPS has no float64")
        if dtype_name == "bfloat16" and not macos_or_newer(14, 0):
            return Support(False, f"MPS has bfloat16 from macOS 14.0 on; this Mac runs macOS "
                                  f"{platform.mac_ver()[0] or 'older than 14.0'} (torch: 'MPS bfloat16 type is "
                                  f"supported on MacOS 14.0 or newer.')")
        return super().supports_dtype(dtype_name)

    def process_group(self, what: str = "FSDP2") -> ProcessGroup:
        return ProcessGroup(False, f"{what} has no MPS process-group backend; run it on CPU (gloo) or CUDA (NCCL)")

    def pin_memory(self) -> Support:
        return Support(False, "torch's DataLoader turns pin_memory off on MPS ('not supported on MPS now')")

    def describe(self) -> dict[str, Any]:
        return {"macos": platform.mac_ver()[0] or None, "mps_available": bool(torch.backends.mps.is_available()),
                "recommended_max_memory_gib": round(torch.mps.recommended_max_memory() / 2**30, 1)}


def macos_or_newer(major: int, minor: int) -> bool:
    """What torch itself asks before it runs an MPS kernel of a dtype (torch.backends.mps.is_macos_or_newer, from
    torch 2.5; the platform's own version before it)."""
    ask = getattr(torch.backends.mps, "is_macos_or_newer", None)
    if ask is not None:
        return bool(ask(major, minor))
    version = tuple(int(x) for x in (platform.mac_ver()[0] or "0").split(".")[:2] if x.isdigit())
    return version >= (major, minor)


DEVICES: dict[str, Device] = {d.name: d for d in (Device(), CUDA(), MPS())}


def get(name: str) -> Device:
    return DEVICES[name]


def _probe_flex(device: str, *, backward: bool) -> Support:
    """Run a tiny FlexAttention (forward, or forward and backward) here; torch's own error says why not."""
    try:
        from torch.nn.attention.flex_attention import flex_attention
    except ImportError as e:
        return Support(False, f"torch.nn.attention.flex_attention is not in this torch: {e}")
    import warnings

    try:
        # grad on whatever the caller's mode: the answer is cached for the process (a first probe under no_grad,
        # as the forward's timing runs, read "does not require grad" and every later check skipped its gradients)
        with warnings.catch_warnings(), torch.enable_grad():
            warnings.simplefilter("ignore")
            # its own generator: probing must not move the seeded global RNG the workloads draw from
            q = torch.randn(1, 1, 128, 16, generator=torch.Generator().manual_seed(0)).to(device)
            q.requires_grad_(backward)
            out = flex_attention(q, q, q)
            if backward:
                out.sum().backward()
            get(device).synchronize()
    except Exception as e:  # the reason is torch's, shown to the user
        what = "forward and backward" if backward else "forward"
        return Support(False, f"FlexAttention {what} does not run on {device} with torch {torch.__version__}: "
                              f"{type(e).__name__}: {first_line(e)}")
    return Support(True)


class HostPeak:
    """Context manager: `bytes` is how far the process's resident set (host RAM) rose above where it was at the
    start of the block, at its highest; `api` names the counter. Linux: the kernel's own high-water mark
    (VmHWM), reset at the start through /proc/self/clear_refs, exact at page granularity. Elsewhere (macOS):
    getrusage's ru_maxrss, the process's lifetime peak, which shows only growth beyond every earlier peak."""

    def __init__(self) -> None:
        self.bytes = 0
        self.api = "getrusage ru_maxrss (process lifetime peak: growth beyond earlier peaks only)"

    def __enter__(self) -> HostPeak:
        self._reset = _reset_hwm()
        if self._reset:
            self.api = "/proc/self/status VmHWM, reset through /proc/self/clear_refs (peak resident set, exact)"
        self._start = _status_bytes("VmRSS") if self._reset else _maxrss()
        return self

    def __exit__(self, *exc: object) -> None:
        peak = _status_bytes("VmHWM") if self._reset else _maxrss()
        self.bytes = max(0, peak - self._start)


def _reset_hwm() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets the peak resident set size (Linux 4.0+)
        return _status_bytes("VmHWM") > 0
    except OSError:
        return False


def _status_bytes(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def _maxrss() -> int:
    import resource
    import sys

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)  # bytes on macOS, KiB elsewhere


def environment() -> dict[str, Any]:
    """What each available device says of itself (GPU, compute capability, macOS), for report.json."""
    out: dict[str, Any] = {}
    for name, device in DEVICES.items():
        if name == "cpu":
            continue
        available = torch.cuda.is_available() if name == "cuda" else torch.backends.mps.is_available()
        if available:
            with contextlib.suppress(Exception):
                out[f"{name}_device"] = device.describe()
    return out
