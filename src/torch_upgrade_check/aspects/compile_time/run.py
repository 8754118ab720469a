"""Cold compile time: torch.compile's first forward with Dynamo reset and a fresh, empty Inductor cache, so that
nothing compiled before helps; and compare's warm-up of a compile-time pair."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

from torch_upgrade_check.model import CheckSpec
from torch_upgrade_check.worker.compiling import fresh_cache
from torch_upgrade_check.worker.devices import Device
from torch_upgrade_check.worker.instance import Instance


def run(spec: CheckSpec, factory: Callable[..., Any], inst: Instance, device: Device) -> dict[str, Any]:
    """Cold compile time: torch.compile's first forward with Dynamo reset and a fresh, empty Inductor cache (on
    disk and in memory), so that nothing compiled before helps; `samples` such compiles (compare's A/B asks
    for one a round)."""
    import torch._dynamo

    fresh = fresh_cache()
    if spec.params.get("warm_up") == "tiny":
        return _warm_compiler(fresh, device)
    if isinstance(inst.model, torch.nn.Module):
        inst.model.eval()
    samples = []
    for _ in range(int(spec.params.get("samples") or 3)):
        torch._dynamo.reset()
        with fresh():
            compiled = torch.compile(inst.model)
            device.synchronize()
            start = time.perf_counter()
            with torch.no_grad():
                compiled(*inst.inputs)
            device.synchronize()
            samples.append((time.perf_counter() - start) * 1000.0)
    torch._dynamo.reset()
    return {"samples_ms": samples, "once_ms": samples[0], "inner_loops": 1, "cache": "fresh Inductor cache per sample"}


def _warm_compiler(fresh: Callable[[], Any], device: Device) -> dict[str, Any]:
    """compare's warm-up round of a compile-time A/B pair: readies what a new process pays for once (Inductor's
    imports, its compile workers, the C++ toolchain's probes) without compiling the whole workload on top of it.
    That once-a-process cost is large: on the shared 2-core machine this was written on, 27-270 s, where
    matmul's later cold compiles took 0.2-0.5 s and FlexAttention's 8-30 s; most of it (on a quiet machine
    ~15 of 24 s) is g++ probing which vector ISAs build, which torch caches on disk in its Inductor cache.
    So a tiny function is compiled twice: first in the process's own cache (compare gives each side one
    across its pairs: the probes are built once a side, then read), then in a fresh, empty cache as a
    timed compile is, which readies what a cold compile does in the process (on a quiet machine the first
    timed compile after it took what it took after a warm-up in a fresh cache alone: 0.2 s, not 0.45)."""
    import torch._dynamo

    x = torch.ones(8, device=device.name)
    start = time.perf_counter()
    for cache in (contextlib.nullcontext, fresh):
        torch._dynamo.reset()
        with cache():
            torch.compile(lambda t: torch.sin(t) * 2 + 1)(x)
            device.synchronize()
    torch._dynamo.reset()
    return {"samples_ms": [(time.perf_counter() - start) * 1000.0], "inner_loops": 1, "warm_up": "tiny"}
