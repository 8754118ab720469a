"""Eager forward latency: warm-up, then samples of `inner` calls each, the device synchronised around each; the
timing loop (`forward_latency`) is shared with compiled-latency (aspects/compiled_latency/run.py)."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any

import torch

from torch_upgrade_check.model import CheckSpec
from torch_upgrade_check.worker.devices import Device
from torch_upgrade_check.worker.instance import Instance


def run(spec: CheckSpec, factory: Callable[..., Any], inst: Instance, device: Device) -> dict[str, Any]:
    """Eager forward latency: warm-up, then samples of `inner` calls each, the device synchronised around each.

    `inner` is given by compare (the same on both sides) or calibrated here so that a sample lasts
    at least `min_sample_s`. The garbage collector is off while samples are timed (it runs between requests).
    """
    if isinstance(inst.model, torch.nn.Module):
        inst.model.eval()
    return forward_latency(spec, inst, device, inst.model)


def forward(spec: CheckSpec, inst: Instance) -> Callable[[], Any]:
    """The forward this aspect times, as one call (worker.opprofile profiles it to attribute a latency change)."""
    if isinstance(inst.model, torch.nn.Module):
        inst.model.eval()
    return lambda: inst.model(*inst.inputs)


def forward_latency(spec: CheckSpec, inst: Instance, device: Device, model: Callable[..., Any]) -> dict[str, Any]:
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
