"""Tensor comparison: per-tensor error metrics of a result against an fp64 golden, and against a reference's own error.

Every tensor is judged on its own, at its own scale: a gradient of 1e-5 is compared as strictly as an
output of 1 (pooling them lets a large output hide a wrong gradient). All arithmetic happens on the
host in float64, after `host` moved each tensor to the CPU.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Mapping
from typing import Any

import torch

# torch.testing.assert_close's defaults per dtype: (rtol, atol); "tf32" as torch's own TF32 tests allow.
DEFAULT_TOLERANCES = {
    "float64": (1e-7, 1e-7),
    "float32": (1.3e-6, 1e-5),
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
    "tf32": (1e-3, 1e-5),
}


def host(t: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    """A detached copy on the CPU, converted there: MPS tensors cannot become float64 on the device."""
    out = t.detach().to("cpu")
    return out.to(dtype) if dtype is not None and out.dtype != dtype else out


def bitwise_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """The same dtype, shape and bits (so -0.0 differs from 0.0, and a bfloat16 output never equals a float32 one);
    NaN equals NaN in the same place (torch.equal never does: a fully masked row would differ from itself)."""
    a, b = host(a), host(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if not a.is_floating_point():
        return torch.equal(a, b)
    nan = torch.isnan(a)
    if not torch.equal(nan, torch.isnan(b)):
        return False
    x, y = a[~nan], b[~nan]
    return torch.equal(x, y) and torch.equal(torch.signbit(x), torch.signbit(y))


def _equal_nan(x: torch.Tensor, y: torch.Tensor) -> bool:
    """torch.equal, with NaN equal to NaN in the same place."""
    if x.shape != y.shape:
        return False
    if not x.is_floating_point() or not y.is_floating_point():
        return torch.equal(x, y)
    nan = torch.isnan(x)
    return torch.equal(nan, torch.isnan(y)) and torch.equal(x[~nan], y[~nan])


def difference(r: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """|r - g| elementwise as torch.testing.assert_close(equal_nan=True) sees equality: 0 where both are NaN (a fully
    masked attention row, NaN in the golden too) or the same infinity; inf where only one side is NaN, which no
    tolerance covers."""
    same = (r == g) | (torch.isnan(r) & torch.isnan(g))
    one_nan = torch.isnan(r) ^ torch.isnan(g)
    apart = torch.where(one_nan, torch.full_like(r, math.inf), (r - g).abs())
    return torch.where(same, torch.zeros_like(apart), apart)


def scale_of(g: torch.Tensor) -> float:
    """The RMS of the golden's finite elements: a NaN or inf there (a masked row) must not make every bound NaN."""
    return _rms(g[torch.isfinite(g)])


def bounds(g: torch.Tensor, *, rtol: float, atol: float, scale: float) -> torch.Tensor:
    """What each element may differ by: atol*scale + rtol*|golden|, the rtol part only where the golden is finite."""
    return atol * scale + rtol * torch.where(torch.isfinite(g), g.abs(), torch.zeros_like(g))


def flatten(value: Any, prefix: str = "output") -> dict[str, torch.Tensor]:
    """Name every tensor in a nested output (tuples, lists, dicts)."""
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


def _rms(x: torch.Tensor) -> float:
    return math.sqrt(float((x * x).mean())) if x.numel() else 0.0


def _tf32(t: torch.Tensor) -> torch.Tensor:
    """float32 -> the nearest value with TF32's 10-bit mantissa (ties to even), still stored as float32."""
    bits = t.float().contiguous().view(torch.int32)
    rounded = ((bits + 0xFFF + ((bits >> 13) & 1)) & ~0x1FFF).view(torch.float32)
    return torch.where(torch.isfinite(t), rounded, t.float()).view(t.shape)


@contextlib.contextmanager
def simulated_tf32() -> Iterator[None]:
    """On the CPU, round the float32 operands of every matmul and convolution to TF32, as tensor cores
    read them: the reference a TF32 result is judged against (attention runs as plain matmuls here)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils._python_dispatch import TorchDispatchMode

    aten = torch.ops.aten
    ops = {aten.mm.default, aten.addmm.default, aten.bmm.default, aten.baddbmm.default,
           aten.convolution.default, aten.convolution_backward.default}

    class RoundOperands(TorchDispatchMode):
        supports_higher_order_operators = True  # run as they are (a workload's `reference` avoids them)

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func in ops:
                args = tuple(_tf32(a) if isinstance(a, torch.Tensor) and a.dtype == torch.float32 else a for a in args)
            return func(*args, **(kwargs or {}))

    with sdpa_kernel([SDPBackend.MATH]), RoundOperands():
        yield


def round_to(golden: torch.Tensor, dtype_name: str) -> torch.Tensor:
    """The golden as the dtype under test can represent it: its rounding error is that dtype's noise floor."""
    if dtype_name == "tf32":
        return _tf32(golden).double()
    dtypes = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
    return golden.to(dtypes[dtype_name]).double() if dtype_name in dtypes else golden


# A gradient is judged at its own scale, but never below this share of the largest gradient's: one a
# million times smaller than its neighbours is rounding noise of the loss, not a signal. The same holds for a
# parameter after amp's step (`param:`) against the largest parameter's: a key projection's bias, which attention
# ignores, stays at its zero init plus lr x that noise.
GRAD_SCALE_FLOOR = 1e-3


def compare(
    result: Mapping[str, torch.Tensor],
    golden: Mapping[str, torch.Tensor],
    *,
    rtol: float,
    atol: float,
    reference: Mapping[str, torch.Tensor] | None = None,
    dtype: str | None = None,
    top: int = 5,
) -> dict[str, Any]:
    """Metrics of `result` against `golden`, per tensor and over all.

    Per tensor T with golden G: scale = RMS(G) (1 when G is all zero; for gradients at least
    GRAD_SCALE_FLOOR x the largest gradient's RMS, for parameters after a step the largest parameter's); an element mismatches when
    |result - golden| > atol*scale + rtol*|golden|; NaN where the golden has NaN is equal, as
    torch.testing.assert_close(equal_nan=True) has it (`nan_as_golden` counts them), and NaN on one side only
    mismatches (`nan`: NaN where the golden has a number; `nan_in_golden_only`: a number where it has NaN); rmse
    against the golden; `ref_rmse` the same for `reference` (the noise floor of a trusted
    implementation in the same dtype) and `ref_equal` (T equals the reference bitwise), when it has T;
    `floor_rmse` that of the golden rounded to `dtype` (the dtype's own representation error). Tensors in
    only one of result and golden are listed in `uncompared`: the verdict fails them, so nothing produced passes unexamined.
    """
    names = [n for n in result if n in golden]
    goldens = {n: host(golden[n], torch.float64).reshape(-1) for n in names}
    largest = {kind: max((scale_of(g) for n, g in goldens.items() if n.startswith(kind)), default=0.0)
               for kind in ("grad:", "param:")}
    per_tensor, worst = [], []
    totals = {"numel": 0, "mismatched": 0, "nan": 0}
    max_abs, max_rel = 0.0, 0.0
    for name in names:
        r, g = host(result[name], torch.float64), goldens[name]
        if tuple(r.shape) != tuple(golden[name].shape):
            raise ValueError(f"{name}: shape {tuple(r.shape)} differs from the golden's {tuple(golden[name].shape)}")
        r = r.reshape(-1)
        kind = name.split(":", 1)[0] + ":"
        scale = max(scale_of(g), GRAD_SCALE_FLOOR * largest.get(kind, 0.0)) or 1.0
        diff, bound = difference(r, g), bounds(g, rtol=rtol, atol=atol, scale=scale)
        mismatched = diff > bound
        entry: dict[str, Any] = {
            "name": name, "numel": int(r.numel()), "scale": scale,
            "max_abs_err": float(diff.max()) if r.numel() else 0.0,
            "mismatched": int(mismatched.sum()),
            "rmse": _rms(diff),  # inf where one side alone has NaN
            "nan": int((torch.isnan(r) & ~torch.isnan(g)).sum()),
            **_nan_counts(r, g),
        }
        if reference is not None and name in reference:
            ref = host(reference[name], torch.float64).reshape(-1)
            entry["ref_rmse"] = _rms(difference(ref, g))
            entry["ref_equal"] = bitwise_equal(result[name], reference[name])
        if dtype is not None:
            entry["floor_rmse"] = _rms(difference(round_to(g, dtype), g))
        per_tensor.append(entry)
        totals["numel"] += entry["numel"]
        totals["mismatched"] += entry["mismatched"]
        totals["nan"] += entry["nan"]
        max_abs = max(max_abs, entry["max_abs_err"])
        nonzero = torch.isfinite(g) & (g.abs() > 1e-3 * scale)  # relative error only where it means something
        entry["max_rel_err"] = float((diff[nonzero] / g.abs()[nonzero]).max()) if bool(nonzero.any()) else 0.0
        max_rel = max(max_rel, entry["max_rel_err"])
        if entry["mismatched"]:
            excess = torch.where(mismatched, diff - bound, torch.zeros_like(diff))
            for i in torch.topk(excess, min(top, entry["mismatched"])).indices.tolist():
                worst.append((float(excess[i]), {"index": f"{name}{_index(tuple(result[name].shape), i)}",
                                                 "got": float(r[i]), "expected": float(g[i]),
                                                 "abs_err": float(diff[i])}))
    metrics: dict[str, Any] = {
        "numel": totals["numel"],
        "tensors": len(names),
        "max_abs_err": max_abs,
        "max_rel_err": max_rel,
        "mismatched_count": totals["mismatched"],
        "mismatched_share": totals["mismatched"] / totals["numel"] if totals["numel"] else 0.0,
        "nan_count": totals["nan"],
        "per_tensor": per_tensor,
    }
    missing = sorted(set(golden) ^ set(result))
    if missing:
        metrics["uncompared"] = missing
    if worst:
        metrics["top_mismatches"] = [row for _, row in sorted(worst, key=lambda x: -x[0])[:top]]
    return metrics


def add_model_error(metrics: dict[str, Any], golden: Mapping[str, torch.Tensor],
                    model: Mapping[str, torch.Tensor]) -> None:
    """Each compared tensor's `model_rmse` and `model_max_abs`: how far `model` (the golden computed with the dtype's
    rounding simulated, worker.rounding) is from the golden; the model's own rounding error, its yardstick."""
    for entry in metrics.get("per_tensor") or []:
        name = entry["name"]
        if name in model and name in golden:
            diff = difference(host(model[name], torch.float64).reshape(-1), host(golden[name], torch.float64).reshape(-1))
            entry["model_rmse"] = _rms(diff)
            entry["model_max_abs"] = float(diff.max()) if diff.numel() else 0.0


def _nan_counts(r: torch.Tensor, g: torch.Tensor) -> dict[str, int]:
    """NaN in the golden's own places (equal), and numbers where the golden has NaN (mismatched); each only when any."""
    counts = {"nan_as_golden": int((torch.isnan(r) & torch.isnan(g)).sum()),
              "nan_in_golden_only": int((torch.isnan(g) & ~torch.isnan(r)).sum())}
    return {k: v for k, v in counts.items() if v}


def _index(shape: tuple[int, ...], flat: int) -> str:
    idx = []
    for dim in reversed(shape):
        idx.append(flat % dim if dim else 0)
        flat //= dim if dim else 1
    return f"[{', '.join(str(i) for i in reversed(idx))}]"


def bitwise_diff(a: Mapping[str, torch.Tensor], b: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """Whether two runs produced bitwise-identical tensors, and how far apart they are if not."""
    differing = []
    max_diff = 0.0
    for name in a:
        if name not in b:
            differing.append(name)
            continue
        x, y = host(a[name]), host(b[name])
        if _equal_nan(x, y):  # NaN where the other run has NaN is the same result
            continue
        differing.append(name)
        if x.shape == y.shape and x.numel():
            max_diff = max(max_diff, float(difference(x.double(), y.double()).max()))
    return {
        "bitwise_equal": not differing,
        "differing_tensors": len(differing),
        "compared_tensors": len(a),
        "max_abs_diff": max_diff,
        "first_differing": differing[:5],
    }
