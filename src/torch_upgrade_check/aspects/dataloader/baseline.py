"""The dataloader check in compare: num_workers=0's orders and batches saved by the baseline, and the candidate's
read against them (the worker side: imports torch)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from torch_upgrade_check.aspects.dataloader.leaves import leaf_difference
from torch_upgrade_check.model import CheckSpec
from torch_upgrade_check.worker import crossversion, tensors
from torch_upgrade_check.worker.instance import Instance, tolerances


def at(order: list[list[int]], k: int) -> Any:
    """The indices of batch k of an epoch's order, or that the epoch ended before it."""
    return order[k] if k < len(order) else "nothing (the epoch ended)"


def path_of(spec: CheckSpec) -> Path:
    """Where the baseline saves num_workers=0's orders and batches for the candidate."""
    return crossversion.store_path(spec).with_suffix(".batches.pt")


def save(spec: CheckSpec, reference: dict[str, Any]) -> None:
    """The baseline's side: num_workers=0's orders and first epoch's batches, with its torch's version."""
    path = path_of(spec)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"torch": str(torch.__version__), "orders": reference["orders"], "batches": reference["first_epoch"]},
               path)


def against(spec: CheckSpec, inst: Instance, reference: dict[str, Any]) -> dict[str, Any]:
    """num_workers=0's orders (every epoch) and first epoch's batches against the baseline's: the same order and
    leaves bitwise; for a team's dataset, floating tensors may instead be within the workload's rtol/atol (its items
    may be computed by torch ops whose rounding a release changed)."""
    path = path_of(spec)
    if not path.exists():  # this side's own loaders are still judged
        return {"vs_baseline": "none"}
    saved = torch.load(path, map_location="cpu", weights_only=True)
    out: dict[str, Any] = {"baseline_torch": saved["torch"]}
    for e, (mine, theirs) in enumerate(zip(reference["orders"], saved["orders"])):
        if mine != theirs:
            k = next((i for i, (a, b) in enumerate(zip(mine, theirs)) if a != b), min(len(mine), len(theirs)))
            return {**out, "vs_baseline": "order", "first_difference_vs_baseline": {
                "epoch": e + 1, "batch": k, "indices": at(mine, k), "baseline_indices": at(theirs, k)}}
    rtol, atol = tolerances(spec, inst)
    worst, rounded = 0.0, 0
    for k, (mine, theirs) in enumerate(zip(reference["first_epoch"], saved["batches"])):
        for key in [*theirs, *(x for x in mine if x not in theirs)]:
            how = leaf_difference(mine.get(key), theirs.get(key)).replace("num_workers=0", "the baseline")
            if not how:
                continue
            a, b = mine.get(key), theirs.get(key)
            close = (spec.factory and isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and
                     a.is_floating_point() and a.dtype == b.dtype and a.shape == b.shape)
            if close:
                gap = tensors.difference(tensors.host(a).double(), tensors.host(b).double())
                if bool((gap <= atol + rtol * tensors.host(b).double().abs()).all()):
                    worst, rounded = max(worst, float(gap.max())), rounded + 1
                    continue
            return {**out, "vs_baseline": "batch", "first_difference_vs_baseline": {
                "epoch": 1, "batch": k, "key": key, "how": how}}
    return {**out, "vs_baseline": "equal" if not rounded else "within tolerance", "compared_batches":
            len(saved["batches"]), **({"rounded_leaves": rounded, "max_abs_diff_vs_baseline": worst,
                                       "rtol": rtol, "atol": atol} if rounded else {})}
