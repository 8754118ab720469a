"""Every SDPA backend this device offers, each forced in turn, against an fp64 golden, forward and backward.

`scaled_dot_product_attention` dispatches to one of several kernels (math, flash, memory-efficient, cuDNN
on CUDA), chosen per call by shape, dtype, mask and device; a new default (cuDNN in 2.5) produced NaN or
lost accuracy at some shapes. The numerics aspect checks the one kernel the default picks for one
shape; this checks each kernel on shapes the fused kernels tile differently: sequence lengths that are
not multiples of their tiles, a boolean mask, keys longer than queries. A kernel this device or torch
does not offer for a case raises, and is recorded as not offered with torch's reason.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from torch_upgrade_check.model import CheckSpec
from torch_upgrade_check.worker import first_line, tensors
from torch_upgrade_check.worker.devices import DTYPES, Device
from torch_upgrade_check.worker.instance import Instance, tolerances

# (name, query length, key length, causal, boolean mask): lengths off the kernels' 16/32/64/128 tiles
CASES = (("causal", 37, 37, True, False), ("masked", 33, 45, False, True), ("tiled", 64, 64, False, False))
HEADS, BATCH, HEAD_DIM = 4, 2, 24


def run(spec: CheckSpec, factory: Callable[..., Any], inst: Instance, device: Device) -> dict[str, Any]:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    dtype = DTYPES[spec.dtype]
    rtol, atol = tolerances(spec, inst)
    backends = [b for name, b in SDPBackend.__members__.items() if name != "ERROR"]
    checked: dict[str, dict[str, Any]] = {}
    not_offered: dict[str, str] = {}
    default: dict[str, str] = {}
    for name, length, key_length, causal, masked in CASES:
        q, k, v, mask, grad = _case(spec.device, dtype, length, key_length, masked)
        golden = _run(*(t.detach().cpu().double().requires_grad_() for t in (q, k, v)),
                      mask.cpu() if mask is not None else None, causal, grad.cpu().double(), _math_attention)
        default[name] = default_choice(q, k, v, mask, causal=causal)
        for backend in backends:
            try:
                with sdpa_kernel([backend]):
                    got = _run(q, k, v, mask, causal, grad, F.scaled_dot_product_attention)
            except RuntimeError as e:
                not_offered[f"{backend.name}/{name}"] = (first_line(e) or type(e).__name__)[:200]
                continue
            device.synchronize()
            checked[f"{backend.name}/{name}"] = tensors.compare(got, golden, rtol=rtol, atol=atol, dtype=spec.dtype)
    return {"cases": {name: {"query_length": q_len, "key_length": k_len, "causal": causal, "bool_mask": masked}
                      for name, q_len, k_len, causal, masked in CASES},
            "checked": checked, "not_offered": not_offered, "default_backend": default, "rtol": rtol, "atol": atol,
            **({"default_note": MPS_DEFAULT_NOTE} if spec.device == "mps" else {})}


def _case(device: str, dtype: torch.dtype, length: int, key_length: int,
          masked: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor]:
    gen = torch.Generator().manual_seed(length * 1000 + key_length)

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=gen).to(device, dtype)

    q = randn(BATCH, HEADS, length, HEAD_DIM).requires_grad_()
    k = randn(BATCH, HEADS, key_length, HEAD_DIM).requires_grad_()
    v = randn(BATCH, HEADS, key_length, HEAD_DIM).requires_grad_()
    mask = None
    if masked:  # about a quarter of the keys hidden from each query, never all of them
        keep = torch.rand(length, key_length, generator=gen) > 0.25
        keep[:, 0] = True
        mask = keep.to(device)
    return q, k, v, mask, randn(BATCH, HEADS, length, HEAD_DIM)


def _math_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: torch.Tensor | None = None,
                    is_causal: bool = False) -> torch.Tensor:
    """The golden's attention, written out: softmax(QK^T/sqrt(d), masked)V, causal aligned top-left as SDPA's."""
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    keep = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril() if is_causal else attn_mask
    if keep is not None:
        scores = scores.masked_fill(~keep, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def _run(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, causal: bool,
         grad: torch.Tensor, attention: Callable[..., torch.Tensor]) -> dict[str, torch.Tensor]:
    out = attention(q, k, v, attn_mask=mask, is_causal=causal)
    dq, dk, dv = torch.autograd.grad(out, (q, k, v), grad)
    return {"output": out.detach(), "grad:query": dq, "grad:key": dk, "grad:value": dv}


# ATen's SDPA asks its fused-backend chooser only on devices that register one (CPU, CUDA, XPU); on MPS
# `_fused_sdp_choice` has no kernel and the default is MATH: MPS's own `_scaled_dot_product_attention_math_for_mps`
# when nothing needs a gradient and there is no dropout, the decomposed math (bmm, softmax) otherwise.
MPS_DEFAULT = "MATH"
MPS_DEFAULT_NOTE = ("on MPS torch picks no fused backend: the default is MATH, run as MPS's "
                    "_scaled_dot_product_attention_math_for_mps without gradients or dropout, as the decomposed "
                    "math (bmm, softmax) with them, as here")


def default_choice(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, *, causal: bool) -> str:
    """The backend torch's default SDPA dispatch picks for these inputs here, by name."""
    from torch.nn.attention import SDPBackend

    try:  # asked on MPS too, so a torch that gives MPS a chooser is reported as it chooses
        return SDPBackend(torch._fused_sdp_choice(q, k, v, mask, 0.0, causal)).name
    except NotImplementedError:  # no kernel for the chooser on this device: ATen takes MATH (MPS today)
        if q.device.type == "mps":
            return MPS_DEFAULT
        return "unknown (NotImplementedError)"
    except Exception as e:  # private API: record why it could not say
        return f"unknown ({type(e).__name__})"
