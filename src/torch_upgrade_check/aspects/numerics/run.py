"""Numerics: the workload's forward and backward in the dtype under test against its fp64 golden on the CPU; for
TF32, against the same computation on the CPU with TF32 rounding simulated (its noise floor). Where a tensor has
elements outside rtol/atol, the model's own rounding error at the dtype is measured too (worker.rounding)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from torch_upgrade_check.aspects.sdpa_backends.run import default_choice
from torch_upgrade_check.model import CheckSpec
from torch_upgrade_check.worker import devices, rounding, tensors
from torch_upgrade_check.worker.devices import DTYPES
from torch_upgrade_check.worker.instance import Instance, build, copy_to, forward_backward, golden, not_checked, tolerances


def run(spec: CheckSpec, factory: Callable[..., Any], inst: Instance, device: devices.Device) -> dict[str, Any]:
    rtol, atol = tolerances(spec, inst)
    reference = _simulated_tf32(factory, inst) if spec.dtype == "tf32" else None
    gold = golden(factory, inst)
    metrics = tensors.compare(forward_backward(inst), gold, reference=reference, rtol=rtol, atol=atol, dtype=spec.dtype)
    if metrics["mismatched_count"] and reference is None:  # the yardstick costs a golden: only where it is read
        dtype = DTYPES[spec.dtype]
        try:
            tensors.add_model_error(metrics, gold, golden(factory, inst, within=lambda: rounding.perturbed(dtype)))
            metrics["model_unit"] = rounding.UNIT[spec.dtype]
        except Exception as e:  # an allowance only (FlexAttention will not compile under a dispatch mode): rtol/atol stand
            metrics["no_yardstick"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
    return {**metrics, "rtol": rtol, "atol": atol, "not_checked": not_checked(inst), **_sdpa_choice(spec, inst)}


def _simulated_tf32(factory: Callable[..., Any], inst: Instance) -> dict[str, torch.Tensor]:
    """The same computation on the CPU with TF32 rounding simulated: the noise floor TF32 results are held to."""
    cpu = build(factory, "cpu", torch.float32)
    copy_to(inst, cpu, torch.float32)
    if cpu.loss is None and inst.loss is not None:
        cpu.loss = inst.loss
    with tensors.simulated_tf32():
        return forward_backward(cpu, use_reference=True)  # a reference (math attention) is plain matmuls


def _sdpa_choice(spec: CheckSpec, inst: Instance) -> dict[str, Any]:
    """For attention workloads: which SDPA backend torch's default dispatch picks for these inputs here."""
    if not getattr(inst.model, "uses_sdpa", False):
        return {}
    q, k, v = inst.inputs[:3]
    return {"sdpa_backend": default_choice(q, k, v, None, causal=True)}
