"""What compare's baseline saves and its candidate loads, shared by every check judged against the baseline's saves:
where a check's file goes, the weights and inputs that make the candidate compute exactly the baseline's function,
and the closeness of the candidate's outputs and fp64 golden to the baseline's (aspects/cross_version/run.py is the
cross-version check itself)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import torch

from torch_upgrade_check.model import CheckSpec
from torch_upgrade_check.worker import tensors
from torch_upgrade_check.worker.instance import Instance


def store_path(spec: CheckSpec) -> Path:
    return Path(spec.params["store"]) / f"{_safe(spec)}.pt"


def _safe(spec: CheckSpec) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{spec.workload}-{spec.dtype}-{spec.device}")


def against_baseline(outputs: dict[str, torch.Tensor], own_golden: dict[str, torch.Tensor], saved: dict[str, Any], *,
                     rtol: float, atol: float, dtype: str) -> dict[str, Any]:
    """`outputs` against the baseline's fp64 golden, with the baseline's own outputs as the noise floor (closeness's
    reference rule); and this torch's fp64 golden against the baseline's (`fp64_vs_baseline`)."""
    metrics = tensors.compare(outputs, saved["golden"], reference=saved["outputs"], rtol=rtol, atol=atol, dtype=dtype)
    metrics["fp64_vs_baseline"] = fp64_change(own_golden, saved["golden"])
    return metrics


def fp64_change(own: dict[str, torch.Tensor], theirs: dict[str, torch.Tensor]) -> dict[str, Any]:
    """This torch's fp64 golden against the baseline's, at float64's own tolerances (rtol = atol = 1e-7, atol in
    units of each tensor's RMS): beyond them, the function itself changed, not its rounding."""
    rtol, atol = tensors.DEFAULT_TOLERANCES["float64"]
    found = tensors.compare(own, theirs, rtol=rtol, atol=atol)
    worst = max(found["per_tensor"], key=lambda t: t["max_abs_err"] / (t["scale"] or 1.0), default=None)
    return {"rtol": rtol, "atol": atol, "tensors": found["tensors"], "mismatched_count": found["mismatched_count"],
            "numel": found["numel"], "max_abs_err": found["max_abs_err"], "max_rel_err": found["max_rel_err"],
            "bitwise_equal": not found.get("uncompared") and all(
                tensors.bitwise_equal(v, theirs[k]) for k, v in own.items() if k in theirs),
            **({"worst": worst["name"]} if worst else {}), **({"uncompared": found["uncompared"]}
                                                            if found.get("uncompared") else {})}


def saved_weights_and_inputs(inst: Instance) -> dict[str, Any]:
    """What the candidate needs to compute exactly the baseline's function: its weights and inputs, on the host."""
    state = {k: tensors.host(v) for k, v in inst.model.state_dict().items()} if isinstance(inst.model, torch.nn.Module) else {}
    return {"state": state, "inputs": [tensors.host(x) if isinstance(x, torch.Tensor) else None for x in inst.inputs]}


def load_into(inst: Instance, saved: dict[str, Any], device: str) -> None:
    """The candidate computes exactly the baseline's function: same weights, same inputs."""
    if saved["state"] and isinstance(inst.model, torch.nn.Module):
        own = inst.model.state_dict()
        inst.model.load_state_dict({k: v.to(device, own[k].dtype) for k, v in saved["state"].items() if k in own})
    inputs = []
    for mine, theirs in zip(inst.inputs, saved["inputs"]):
        if isinstance(mine, torch.Tensor) and theirs is not None and theirs.shape == mine.shape:
            inputs.append(theirs.to(device, mine.dtype).requires_grad_(mine.requires_grad))
        else:
            inputs.append(mine)
    inst.inputs = tuple(inputs)
