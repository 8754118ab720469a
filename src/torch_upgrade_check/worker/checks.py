"""The worker's loop over one check: the workload built (or reused), the device's precision, and the aspect's own
run.py (its folder's `run(spec, factory, inst, device)`) returning raw metrics (no pass/fail decisions here).

Device specifics (synchronising, memory counters, precision flags, deterministic algorithms, what
FlexAttention can do) come from the device object in `devices`; host transfers from `tensors.host`.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

from torch_upgrade_check.aspects import ASPECT, Runs, part
from torch_upgrade_check.model import CheckSpec
from torch_upgrade_check.worker import devices, opprofile
from torch_upgrade_check.worker.devices import DTYPES
from torch_upgrade_check.worker.instance import Instance, Skip, build, resolve_factory


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
    """The workload built for this check, or the one `cache` keeps. On a device with a live counter a check whose
    run.py says BUILT_ALONE (peak memory's) counts from the allocated bytes read just before its instance was built
    (`allocated_before`): the weights and inputs it keeps there count, what earlier checks left (collected first)
    does not. So in the A/B rounds its instance is built alone on the device, and again once another was built there
    after it."""
    key = (spec.workload, spec.dtype, spec.device)
    alone = getattr(part(spec.aspect, "run"), "BUILT_ALONE", False) and device.allocated() is not None
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


def runner(aspect: str) -> Callable[[CheckSpec, Callable[..., Any], Instance, devices.Device], dict[str, Any]]:
    """The function that runs a check of `aspect`: its folder's run.run (KeyError for an aspect no worker runs)."""
    module = part(aspect, "run")
    if module is None:
        raise KeyError(f"aspect {aspect!r} has no run.py: its checks do not run in a worker")
    return module.run


__all__ = ["Skip", "build", "run", "runner"]
