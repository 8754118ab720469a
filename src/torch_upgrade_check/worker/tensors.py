"""Tensor comparison: error metrics of a result against an fp64 golden, and against a reference's own error."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch

# torch.testing.assert_close's defaults per dtype: (rtol, atol).
DEFAULT_TOLERANCES = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1.3e-6, 1e-5),
    torch.float16: (1e-3, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
}


def flatten(value: Any, prefix: str = "output") -> dict[str, torch.Tensor]:
    """Name every tensor in a nested output (tuples, lists, dicts, dataclass-like objects with tensors)."""
    if isinstance(value, torch.Tensor):
        return {prefix: value}
    out: dict[str, torch.Tensor] = {}
    if isinstance(value, Mapping):
        for k, v in value.items():
            out.update(flatten(v, f"{prefix}.{k}"))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            out.update(flatten(v, f"{prefix}[{i}]"))
    return out


def _vector(tensors: Mapping[str, torch.Tensor], names: list[str]) -> torch.Tensor:
    parts = [tensors[n].detach().to("cpu", torch.float64).reshape(-1) for n in names]
    return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.float64)


def _rmse(a: torch.Tensor, b: torch.Tensor) -> float:
    return math.sqrt(float(((a - b) ** 2).mean())) if a.numel() else 0.0


def compare(
    result: Mapping[str, torch.Tensor],
    golden: Mapping[str, torch.Tensor],
    *,
    rtol: float,
    atol: float,
    reference: Mapping[str, torch.Tensor] | None = None,
    dtype: torch.dtype | None = None,
    top: int = 5,
) -> dict[str, Any]:
    """Metrics of `result` against `golden` (compared in float64 on the CPU).

    mismatched: |result - golden| > atol + rtol * |golden|, NaN in result counts as mismatched.
    rmse: root mean square error against golden; `ref_rmse` the same for `reference` when given
    (the noise floor of a trusted implementation in the same dtype), and `floor_rmse` that of the
    golden rounded to `dtype` (the dtype's own representation error).
    """
    names = [n for n in result if n in golden]
    missing = sorted(set(golden) ^ set(result))
    for n in names:
        if tuple(result[n].shape) != tuple(golden[n].shape):
            raise ValueError(f"{n}: shape {tuple(result[n].shape)} differs from the golden's {tuple(golden[n].shape)}")
    r, g = _vector(result, names), _vector(golden, names)
    diff = (r - g).abs()
    nan_in_result = torch.isnan(r) & ~torch.isnan(g)
    diff = torch.where(nan_in_result, torch.full_like(diff, math.inf), diff)
    bound = atol + rtol * g.abs()
    mismatched = (diff > bound) | nan_in_result
    nonzero = g.abs() > 0
    rel = diff[nonzero] / g.abs()[nonzero]
    metrics: dict[str, Any] = {
        "numel": int(r.numel()),
        "tensors": len(names),
        "max_abs_err": float(diff.max()) if r.numel() else 0.0,
        "max_rel_err": float(rel.max()) if rel.numel() else 0.0,
        "mismatched_count": int(mismatched.sum()),
        "mismatched_share": float(mismatched.double().mean()) if r.numel() else 0.0,
        "rmse": _rmse(r, g) if not bool(nan_in_result.any()) else math.inf,
        "nan_count": int(torch.isnan(r).sum()),
    }
    if missing:
        metrics["uncompared"] = missing
    if reference is not None:
        metrics["ref_rmse"] = _rmse(_vector(reference, names), g)
    if dtype is not None:
        metrics["floor_rmse"] = _rmse(g.to(dtype).to(torch.float64), g)
    if metrics["mismatched_count"]:
        excess = torch.where(mismatched, diff - bound, torch.zeros_like(diff))
        worst = torch.topk(excess, min(top, int(mismatched.sum()))).indices.tolist()
        offsets = _offsets(result, names)
        metrics["top_mismatches"] = [
            {"index": _locate(offsets, i), "got": float(r[i]), "expected": float(g[i]), "abs_err": float(diff[i])}
            for i in worst
        ]
    return metrics


def _offsets(tensors: Mapping[str, torch.Tensor], names: list[str]) -> list[tuple[int, str, tuple[int, ...]]]:
    offsets, start = [], 0
    for n in names:
        offsets.append((start, n, tuple(tensors[n].shape)))
        start += tensors[n].numel()
    return offsets


def _locate(offsets: list[tuple[int, str, tuple[int, ...]]], flat: int) -> str:
    for start, name, shape in reversed(offsets):
        if flat >= start:
            idx, rest = [], flat - start
            for dim in reversed(shape):
                idx.append(rest % dim if dim else 0)
                rest //= dim if dim else 1
            return f"{name}[{', '.join(str(i) for i in reversed(idx))}]"
    return str(flat)


def bitwise_diff(a: Mapping[str, torch.Tensor], b: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """Whether two runs produced bitwise-identical tensors, and how far apart they are if not."""
    differing = [n for n in a if n not in b or not torch.equal(a[n], b[n])]
    max_diff = 0.0
    for n in differing:
        if n in b and a[n].shape == b[n].shape:
            d = (a[n].detach().double() - b[n].detach().double()).abs().max()
            max_diff = max(max_diff, float(d) if not torch.isnan(d) else math.inf)
    return {
        "bitwise_equal": not differing,
        "differing_tensors": len(differing),
        "compared_tensors": len(a),
        "max_abs_diff": max_diff,
        "first_differing": differing[:5],
    }
