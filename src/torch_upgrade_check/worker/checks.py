"""The aspects: each runs one workload one way and returns raw metrics (no pass/fail decisions here).

Device specifics (synchronising, memory counters, precision flags, deterministic algorithms, what
FlexAttention can do) come from the device object in `devices`; host transfers from `tensors.host`.
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Callable
from typing import Any

import torch

from torch_upgrade_check.aspects import ASPECT, Runs, part
from torch_upgrade_check.model import CheckSpec
from torch_upgrade_check.worker import (
    compiling,
    devices,
    opprofile,
    optiming,
)
from torch_upgrade_check.worker.compiling import fresh_cache as _fresh_inductor_cache
from torch_upgrade_check.worker.compiling import graphs_compiled
from torch_upgrade_check.worker.devices import DTYPES
from torch_upgrade_check.worker.instance import (
    Instance,
    Skip,
    build,
    forward_backward,
    resolve_factory,
)


def run(spec: CheckSpec, cache: dict[tuple[str, str, str], Instance] | None = None) -> dict[str, Any]:
    """Run one check and return its metrics; raises Skip when the aspect does not apply.

    With `cache`, instances are reused across calls (the A/B latency rounds of `compare`).
    """
    device = devices.get(spec.device)
    loader = part(spec.aspect, "run") if spec.aspect in ASPECT and not ASPECT[spec.aspect].builds_workload else None
    if loader is not None:  # a file the team ships: it has its own dtypes, and maybe no factory
        return loader.run(spec, spec.device)
    support = device.supports_dtype(spec.dtype)
    if not support.ok:
        raise Skip(support.reason)
    ranks = part(spec.aspect, "run") if spec.aspect in ASPECT and ASPECT[spec.aspect].runs is Runs.TORCHRUN else None
    if ranks is not None:  # torchrun's ranks build their own model: no factory, no instance here
        return ranks.run(spec, device)
    factory = resolve_factory(spec)
    with device.precision(spec.dtype) as flags:
        inst = _instance(spec, factory, device, cache)
        if spec.aspect in inst.skip:
            raise Skip(inst.skip[spec.aspect])
        if spec.params.get("profile"):  # compare's attribution of a latency change: the forward, op by op
            metrics = opprofile.run(spec, inst, device)
        else:
            metrics = runner(spec.aspect)(spec, factory, inst, device)
    return {**metrics, **({"precision": flags} if flags else {})}


def _instance(spec: CheckSpec, factory: Callable[..., Any], device: devices.Device,
              cache: dict[tuple[str, str, str], Instance] | None) -> Instance:
    """The workload built for this check, or the one `cache` keeps. On a device with a live counter a memory
    check's peak counts from the allocated bytes read just before its instance was built (`allocated_before`):
    the weights and inputs it keeps there count, what earlier checks left (collected first) does not. So in the
    A/B rounds its instance is built alone on the device, and again once another was built there after it."""
    key = (spec.workload, spec.dtype, spec.device)
    alone = spec.aspect == "memory" and device.allocated() is not None
    cached = cache.get(key) if cache is not None else None
    if cached is not None and (not alone or cached.allocated_before is not None):
        return cached
    cached = None  # an instance replaced here must be freed before the device's bytes are read
    if alone and cache is not None:
        for other in [k for k in cache if k[2] == spec.device]:
            del cache[other]
    if alone:
        gc.collect()  # garbage of earlier checks in a cycle would be freed during the call, and read as a shrink
    before = device.allocated() if alone else None
    inst = build(factory, spec.device, DTYPES[spec.dtype])
    inst.allocated_before = before
    if cache is not None:
        for k, other in cache.items():
            if k[2] == spec.device:
                other.allocated_before = None  # built before this one: its zero no longer holds
        cache[key] = inst
    return inst




def compile_time(spec: CheckSpec, factory: Callable[..., Any], inst: Instance, device: devices.Device) -> dict[str, Any]:
    """Cold compile time: torch.compile's first forward with Dynamo reset and a fresh, empty Inductor cache (on
    disk and in memory), so that nothing compiled before helps; `samples` such compiles (compare's A/B asks
    for one a round)."""
    import torch._dynamo

    fresh = _fresh_inductor_cache()
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


def _warm_compiler(fresh: Callable[[], Any], device: devices.Device) -> dict[str, Any]:
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


def latency(spec: CheckSpec, factory: Callable[..., Any], inst: Instance, device: devices.Device) -> dict[str, Any]:
    """Eager forward latency: warm-up, then samples of `inner` calls each, the device synchronised around each.

    `inner` is given by compare (the same on both sides) or calibrated here so that a sample lasts
    at least `min_sample_s`. The garbage collector is off while samples are timed (it runs between requests).
    """
    if isinstance(inst.model, torch.nn.Module):
        inst.model.eval()
    return _forward_latency(spec, inst, device, inst.model)


def compiled_latency(spec: CheckSpec, factory: Callable[..., Any], inst: Instance, device: devices.Device
                     ) -> dict[str, Any]:
    """The compiled model's forward latency, timed as `latency` times eager's. The model is compiled once an instance
    (compare's A/B rounds reuse it), its first, compiling call outside the timed calls (`compile_s`, with Dynamo's
    imports; `compiled_s`: what this request spent compiling, which compare's budget leaves out). Dynamo is reset
    before a compile (its recompile limit is shared by every model in the worker); where anything compiled in this
    worker since this model's last samples (another check's compile, a reset that makes it compile again), one call
    untimed first; where it still compiled while it was timed, it is timed again. A model that compiled no graph
    raises: its samples would be eager's."""
    start = time.perf_counter()
    import torch._dynamo  # a worker's first: seconds, the compile's

    if isinstance(inst.model, torch.nn.Module):
        inst.model.eval()
    entry = inst.compiled.get("compiled-latency")
    if entry is None:
        torch._dynamo.reset()
        entry = {"model": compiling.compiled(spec, inst), "seen": None}
    compiled_s = 0.0  # what this call spent compiling (compare's budget leaves it out, as compile-time's warm-ups)
    if graphs_compiled() != entry["seen"]:  # new, or something compiled in this worker since its last samples
        before = graphs_compiled()
        with torch.no_grad():
            entry["model"](*inst.inputs)
        device.synchronize()
        compiled_s = time.perf_counter() - start
        if "compile_s" not in entry:
            entry.update(compile_s=compiled_s, graphs=graphs_compiled() - before)
            inst.compiled["compiled-latency"] = entry
        if not entry["graphs"]:
            raise RuntimeError("torch.compile compiled no graph of this model (it ran eagerly): its samples would be "
                               "eager latency's")
    seen = graphs_compiled()
    metrics = _forward_latency(spec, inst, device, entry["model"])
    again = graphs_compiled() != seen
    if again:
        metrics = _forward_latency(spec, inst, device, entry["model"])
    entry["seen"] = graphs_compiled()
    return {**metrics, "compile_s": entry["compile_s"], "compiled_s": compiled_s, "graphs_compiled": entry["graphs"],
            **({"timed_again": "it compiled again while timed"} if again else {})}


def _forward_latency(spec: CheckSpec, inst: Instance, device: devices.Device, model: Callable[..., Any]
                     ) -> dict[str, Any]:
    params = spec.params
    budget_s = float(params.get("latency_budget_s") or 1.0)
    min_samples, max_samples = 5, 30
    if params.get("samples"):  # a fixed batch: one round of compare's interleaved A/B measurement
        min_samples = max_samples = int(params["samples"])
    inputs = inst.inputs

    def timed(loops: int) -> float:
        device.synchronize()
        t0 = time.perf_counter()
        for _ in range(loops):
            model(*inputs)
        device.synchronize()
        return time.perf_counter() - t0

    with torch.no_grad():
        for _ in range(int(params.get("warmup", 3))):
            model(*inputs)
        # a single call is timed only to calibrate `inner`: compare's A/B rounds give it, and each call costs a forward
        once = None if params.get("inner") else max(timed(1), 1e-7)
        inner = int(params.get("inner") or max(1, int(float(params.get("min_sample_s", 0.005)) / once) + 1))
        samples: list[float] = []
        # no collection before timing: with Dynamo's and Inductor's objects alive it costs ~100 ms a request
        enabled = gc.isenabled()
        gc.disable()
        try:
            began = time.perf_counter()
            while len(samples) < max_samples and (len(samples) < min_samples or time.perf_counter() - began < budget_s):
                samples.append(timed(inner) * 1000.0 / inner)
        finally:
            if enabled:
                gc.enable()
    return {"samples_ms": samples, "inner_loops": inner, "once_ms": None if once is None else once * 1000.0,
            "threads": torch.get_num_threads()}


def memory_(spec: CheckSpec, factory: Callable[..., Any], inst: Instance, device: devices.Device) -> dict[str, Any]:
    """Peak memory of one forward (and backward, with a loss), measured with the backend's own counter, and how
    far the process's host RAM (resident set) rose meanwhile: CPU offload and host-side copies show there. On
    CUDA and MPS the peak counts what the workload holds on the device before the call too (`resident_bytes`:
    weights, inputs, buffers torch keeps for it): a card must hold all of it."""
    with devices.HostPeak() as host, device.peak_memory(since=inst.allocated_before) as peak:
        forward_backward(inst)
    resident = {"resident_bytes": peak.resident} if peak.resident is not None else {}
    return {"peak_bytes": peak.bytes, "memory_api": peak.api, **resident, "host_peak_bytes": host.bytes,
            "host_memory_api": host.api}


ASPECTS: dict[str, Callable[[CheckSpec, Callable[..., Any], Instance, devices.Device], dict[str, Any]]] = {
    "compile-time": compile_time,
    "latency": latency,
    "op-latency": lambda spec, factory, inst, device: optiming.run(spec, inst, device),
    "compiled-latency": compiled_latency,
    "memory": memory_,
}




def runner(aspect: str) -> Callable[[CheckSpec, Callable[..., Any], Instance, devices.Device], dict[str, Any]]:
    """The function that runs a check of `aspect`: its folder's run.run, else this module's table's."""
    module = part(aspect, "run")
    return module.run if module is not None else ASPECTS[aspect]


__all__ = ["ASPECTS", "Skip", "build", "run", "runner"]
