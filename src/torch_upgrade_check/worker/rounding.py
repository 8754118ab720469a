"""The model's own rounding error: its fp64 golden computed again with every op's result perturbed as a lower
precision's arithmetic perturbs it, by float64 kernels (the yardstick numerics and amp judge a result against).

A dtype's arithmetic rounds each op's result to the dtype (its unit roundoff u, and its range: float16 underflows
below 6e-8), and an op that accumulates K terms (a matmul's inner dimension, a convolution's Cin/groups x kh x kw, a
weight gradient's batch x positions, a sum, a softmax's row) leaves it off by about u·√K of the result's RMS (the
probabilistic rounding-error bound of Higham & Mary, SIAM J. Sci. Comput. 2019): `perturbed` adds such a seeded
error and rounds every arithmetic op's result to the dtype, forward and backward, so the golden's distance from
this run is what rounding alone does to *this* model, carried through its depth and amplified or damped by its
own conditioning (a near-cancelling output, a normalisation, activations small enough to underflow). PyTorch's own
accuracy rule (torch._dynamo's `same(fp64_ref=...)`) judges a result against a trusted reference's error; numerics
alone has no trusted run of the kernels under test, so this stands in for one. Its kernels are float64, the
golden's, so a kernel changed in float32 or float16 alone does not move it.

Under autocast only some ops run in the low dtype: `LowPrecisionOps` records which (in the real autocast step),
and `perturbed(torch.float32, low=those, low_dtype=...)` casts their operands and rounds their results to the low
dtype, and the rest to float32.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

UNIT = {"float64": 2.0**-53, "float32": 2.0**-24, "tf32": 2.0**-11, "float16": 2.0**-11, "bfloat16": 2.0**-8}
SEED = 20261205  # fixed: the yardstick is the same every run
# ops that round nothing (they move, pick, compare or clamp values): perturbing them would overstate the error
EXACT = ("clone", "_to_copy", "copy", "cat", "stack", "index", "gather", "select", "slice", "embedding", "max_pool",
         "relu", "threshold", "where", "masked_fill", "constant_pad", "zeros", "ones", "empty", "full", "fill",
         "detach", "lift", "split", "unbind", "view", "expand", "permute", "transpose", "t", "squeeze", "unsqueeze",
         "reshape", "_unsafe_view", "alias", "as_strided", "new_", "scalar_tensor", "arange", "flip", "roll",
         "repeat", "narrow", "diagonal", "unfold", "sort", "topk", "max", "min", "amax", "amin", "argmax", "argmin",
         "eq", "ne", "lt", "gt", "le", "ge", "isnan", "isinf", "_local_scalar_dense", "clamp", "hardtanh", "abs",
         "neg", "sign", "logical", "bitwise", "_assert", "sym_", "tril", "triu", "masked_select", "nonzero")
MATMULS = ("mm", "addmm", "bmm", "baddbmm", "addbmm", "matmul", "dot", "mv", "addmv", "linear")


def _name(func: Any) -> str:
    return func._schema.name.split("::")[-1] if hasattr(func, "_schema") else str(func)


def _is_exact(func: Any) -> bool:
    name = _name(func)
    return any(name == e or name.startswith((e + "_", e if e.endswith("_") else e + "_")) for e in EXACT)


def _rounds(func: Any) -> bool:
    """An arithmetic op whose results are new tensors (not views, not written in place); a higher-order op
    (FlexAttention's) has no schema and runs as it is: its inner ops are dispatched on their own."""
    schema = getattr(func, "_schema", None)
    return (schema is not None and not schema.is_mutable and all(r.alias_info is None for r in schema.returns)
            and not _is_exact(func))


def _floating(args: Any) -> list[torch.Tensor]:
    found = []
    for a in args:
        if isinstance(a, torch.Tensor) and a.is_floating_point():
            found.append(a)
        elif isinstance(a, (list, tuple)):
            found += _floating(a)
    return found


def accumulation(func: Any, args: tuple[Any, ...], out: torch.Tensor, index: int) -> int:
    """How many terms the op sums into each element of its `index`-th result (1 for an elementwise op)."""
    name = _name(func)
    tensors = _floating(args)
    if name in MATMULS:
        first = tensors[1] if name.startswith("add") or name.startswith("badd") else tensors[0]
        return max(1, int(first.shape[-1])) if first.dim() else 1
    if name == "convolution" and len(tensors) >= 2:
        return max(1, tensors[1][0].numel())
    if name == "convolution_backward" and len(tensors) >= 3:
        grad_out, weight = tensors[0], tensors[2]
        if index == 0:  # the input's gradient sums over Cout/groups x kh x kw
            groups = args[9] if len(args) > 9 and isinstance(args[9], int) else 1
            return max(1, weight.shape[0] // max(1, groups) * weight[0, 0].numel())
        return max(1, grad_out.numel() // max(1, grad_out.shape[1]))  # the weight's and bias's: N x positions
    if "softmax" in name and len(args) > 1 and isinstance(args[1], int):
        return max(1, int(tensors[0].shape[args[1]]))
    if "attention" in name and len(tensors) >= 2:
        return max(1, int(tensors[1].shape[-2]), int(tensors[0].shape[-1]))
    if "layer_norm" in name and len(args) > 1 and isinstance(args[1], (list, tuple)):
        return max(1, math.prod(int(s) for s in args[1]), max(t.numel() for t in tensors) // max(1, out.numel()))
    return max(1, max((t.numel() for t in tensors), default=1) // max(1, out.numel()))


class _Perturb(TorchDispatchMode):
    """Every arithmetic op's floating results rounded to `dtype` (its precision and its range: a float16 result
    below 6e-8 is 0, above 65504 inf), after an error of u·√K of the result's RMS where the op sums K terms; ops in
    `low` have their floating operands cast to `low_dtype` (as autocast casts them) and their results rounded to it."""

    supports_higher_order_operators = True  # run as they are (see _rounds)

    def __init__(self, dtype: torch.dtype, low: frozenset[str] = frozenset(), low_dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.dtype, self.low, self.low_dtype = dtype, low, low_dtype or dtype
        self.generator = torch.Generator().manual_seed(SEED)

    def _noise(self, t: torch.Tensor) -> torch.Tensor:
        return torch.rand(t.shape, generator=self.generator, dtype=t.dtype, device=t.device) * 2 - 1

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if not _rounds(func):
            return func(*args, **kwargs)
        dtype = self.low_dtype if str(func) in self.low else self.dtype
        if dtype is not self.dtype:
            args = tuple(_round(a, dtype) if isinstance(a, torch.Tensor) else a for a in args)
        out = func(*args, **kwargs)
        many = isinstance(out, (tuple, list))
        results = list(out) if many else [out]
        for i, result in enumerate(results):
            if not isinstance(result, torch.Tensor) or not result.is_floating_point() or not result.numel():
                continue
            k = accumulation(func, args, result, i)
            if k > 1:
                finite = result[torch.isfinite(result)]
                rms = float(finite.square().mean().sqrt()) if finite.numel() else 0.0
                result = result + self._noise(result) * (torch.finfo(dtype).eps / 2 * math.sqrt(k) * rms)  # noqa: PLW2901
            results[i] = _round(result, dtype)
        return type(out)(results) if many else results[0]


def _round(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """`t` as `dtype` holds it (nearest, with its range), kept in `t`'s own dtype."""
    return t.to(dtype).to(t.dtype) if t.is_floating_point() and t.dtype != dtype else t


@contextlib.contextmanager
def perturbed(dtype: torch.dtype, low: frozenset[str] = frozenset(),
              low_dtype: torch.dtype | None = None) -> Iterator[None]:
    """Within it, every arithmetic op rounds as `dtype`'s arithmetic would (ops in `low`: as `low_dtype`'s)."""
    with _Perturb(dtype, low, low_dtype):
        yield


class LowPrecisionOps(TorchDispatchMode):
    """Records the ops that returned `dtype` while it is entered (what autocast ran in low precision)."""

    supports_higher_order_operators = True  # run as they are (see _rounds)

    def __init__(self, dtype: torch.dtype) -> None:
        super().__init__()
        self.dtype, self.ops = dtype, set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        results = out if isinstance(out, (tuple, list)) else (out,)
        if any(isinstance(r, torch.Tensor) and r.dtype == self.dtype for r in results) and _rounds(func):
            self.ops.add(str(func))
        return out
