"""Deterministic FlexAttention backward on CUDA: a compiled training step twice under deterministic algorithms,
compared bitwise, with each FlexAttention backend this GPU and torch can run.

BACKEND='TRITON' is what torch.compile uses by default on CUDA. BACKEND='FLASH' (flash-attn-4's CuTe
kernels) has a deterministic backward with block masks from torch 2.13 on, when the GPU is SM100+
and the block mask carries dQ write-order metadata; where that is not so, the check says exactly
which requirement is missing, naming this GPU.
"""

from __future__ import annotations

import importlib.util
import inspect
from collections.abc import Callable
from typing import Any

import torch

from torch_upgrade_check.model import CheckSpec
from torch_upgrade_check.worker import first_line, tensors
from torch_upgrade_check.worker.devices import DTYPES, Device
from torch_upgrade_check.worker.instance import Instance, Skip, build

FLASH_MIN_MAJOR = 10  # torch: "Deterministic backward ... BACKEND='FLASH' requires SM100+ (compute capability >= 10.0)"


def flash_requirements(device: Device) -> list[str]:
    """What BACKEND='FLASH' deterministic backward needs and this machine lacks (empty: it can run)."""
    from torch.nn.attention.flex_attention import create_block_mask

    missing = []
    major = torch.cuda.get_device_capability()[0]
    if major < FLASH_MIN_MAJOR:
        name = device.describe().get("gpu", "this GPU")
        missing.append(f"compute capability >= {FLASH_MIN_MAJOR}.0 (SM100+); this GPU is {device.capability()} ({name})")
    if importlib.util.find_spec("flash_attn") is None or importlib.util.find_spec("flash_attn.cute") is None:
        missing.append("the flash-attn-4 package (flash_attn.cute is not importable)")
    if "compute_dq_write_order" not in inspect.signature(create_block_mask).parameters:
        missing.append(f"create_block_mask(compute_dq_write_order=True), which torch {torch.__version__} lacks")
    return missing


def run(spec: CheckSpec, factory: Callable[..., Any], inst: Instance, device: Device) -> dict[str, Any]:
    if device.name != "cuda":
        why = device.flex["backward"]
        detail = f" ({why.reason})" if not why.ok else ""
        raise Skip(f"deterministic FlexAttention backward is a CUDA feature; the device under test is {device.name}{detail}")
    if not hasattr(inst.model, "mask_mod"):
        raise Skip("deterministic-backward runs the built-in FlexAttention workloads only")
    missing = flash_requirements(device)
    flash_note = f"; BACKEND='FLASH' not run: needs {'; '.join(missing)}" if missing else ""
    runs: dict[str, Any] = {}
    with device.deterministic():
        for backend in ["TRITON", *(["FLASH"] if not missing else [])]:
            try:
                first = _step(factory, spec, inst, backend)
                second = _step(factory, spec, inst, backend)
            except Exception as e:  # say which backend failed, and what was not tried
                raise RuntimeError(f"BACKEND='{backend}': {type(e).__name__}: {first_line(e)}{flash_note}") from e
            runs[backend] = tensors.bitwise_diff(first, second)
    return {"backends": runs, "bitwise_equal": all(r["bitwise_equal"] for r in runs.values()),
            "differing_tensors": sum(r["differing_tensors"] for r in runs.values()),
            "compared_tensors": sum(r["compared_tensors"] for r in runs.values()),
            "max_abs_diff": max(r["max_abs_diff"] for r in runs.values()),
            "first_differing": [f"{b}:{n}" for b, r in runs.items() for n in r["first_differing"]][:5],
            "flash_not_run": "; ".join(missing)}


def _step(factory: Callable[..., Any], spec: CheckSpec, inst: Instance, backend: str) -> dict[str, torch.Tensor]:
    """One compiled forward and backward of FlexAttention from freshly seeded inputs."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    fresh = build(factory, spec.device, DTYPES[spec.dtype], seed=0)
    q, k, v = (x.detach().requires_grad_(True) for x in fresh.inputs[:3])
    block_mask = None
    if inst.model.mask_mod is not None:
        extra = {"compute_dq_write_order": True} if backend == "FLASH" else {}
        block_mask = create_block_mask(inst.model.mask_mod, None, None, q.shape[-2], k.shape[-2], device=spec.device,
                                       **extra)
    torch._dynamo.reset()
    compiled = torch.compile(flex_attention, fullgraph=True)
    out = compiled(q, k, v, score_mod=inst.model.score_mod, block_mask=block_mask, kernel_options={"BACKEND": backend})
    out.float().pow(2).mean().backward()
    torch.cuda.synchronize()
    return {"output": out.detach(), "grad:q": q.grad.detach(), "grad:k": k.grad.detach(), "grad:v": v.grad.detach()}
