"""Cross-version numerics: the baseline saves its inputs, weights, outputs and fp64 golden; the candidate loads
them, computes the same function and is judged against the baseline's golden (its noise floor: the baseline's
own error), naming the first module whose output diverges and, where it is out of tolerance, the first aten op
whose kernel changed (`opreplay`: the baseline records its ops, the candidate replays them).

The candidate's own golden is never the yardstick: a kernel that changed in every dtype changes the candidate's
golden with it (issue 20: a gelu 0.1% off everywhere passed). It is compared with the baseline's instead, and a
changed fp64 result is a finding of its own (`fp64_vs_baseline`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from torch_upgrade_check.model import CheckSpec
from torch_upgrade_check.worker import crossversion, first_line, opreplay, tensors
from torch_upgrade_check.worker.instance import Instance, Skip, forward_backward, golden, not_checked, tolerances


def run(spec: CheckSpec, factory: Callable[..., Any], inst: Instance, device: Any) -> dict[str, Any]:
    path = crossversion.store_path(spec)
    if spec.params.get("mode") == "save":
        outputs, modules = _outputs_with_modules(inst)
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(
            {
                "torch": str(torch.__version__),
                **crossversion.saved_weights_and_inputs(inst),
                "outputs": {k: tensors.host(v) for k, v in outputs.items()},
                "golden": {k: tensors.host(v) for k, v in golden(factory, inst).items()},
                "modules": modules,
            },
            path,
        )
        try:  # the op recording only explains a failure: it never costs the candidate its comparison
            recorded = opreplay.record(inst, path.with_suffix(".ops.pt"))
        except Exception as e:
            recorded = {"ops_record_error": f"{type(e).__name__}: {first_line(e)}"[:300]}
        return {"saved": str(path), "tensors": len(outputs), **recorded}
    if not path.exists():
        raise Skip("the baseline saved no outputs for this check (it did not run there, or failed there)")
    saved = torch.load(path, map_location="cpu", weights_only=True)
    crossversion.load_into(inst, saved, spec.device)
    outputs, modules = _outputs_with_modules(inst)
    rtol, atol = tolerances(spec, inst)
    metrics = crossversion.against_baseline(outputs, golden(factory, inst), saved, rtol=rtol, atol=atol, dtype=spec.dtype)
    vs_baseline = tensors.compare(outputs, saved["outputs"], rtol=rtol, atol=atol)
    metrics.update(
        rtol=rtol,
        atol=atol,
        baseline_torch=saved["torch"],
        not_checked=not_checked(inst),
        max_abs_diff_vs_baseline=vs_baseline["max_abs_err"],
        mismatched_vs_baseline=vs_baseline["mismatched_count"],
        bitwise_equal_to_baseline=not vs_baseline.get("uncompared") and all(
            tensors.bitwise_equal(v, saved["outputs"][k]) for k, v in outputs.items()),
    )
    first = _first_divergent(modules, saved["modules"], rtol, atol)
    if first:
        metrics["first_divergent_module"] = first
    ops = path.with_suffix(".ops.pt")
    if (not metrics["bitwise_equal_to_baseline"] or metrics["fp64_vs_baseline"]["mismatched_count"]) and ops.exists():
        own = {("float32" if spec.dtype == "tf32" else spec.dtype): (rtol, atol)}
        try:
            op = opreplay.first_changed(ops, spec.device, {**tensors.DEFAULT_TOLERANCES, **own}, repro_dir(spec),
                                        path.stem)
            if op["op"] is None:
                op["calls_changed"] = opreplay.first_call_changed(inst, ops)
            metrics["first_divergent_op"] = op
        except Exception as e:  # the verdict stands without it
            metrics["first_divergent_op_error"] = f"{type(e).__name__}: {first_line(e)}"[:300]
    return metrics


def repro_dir(spec: CheckSpec) -> Path:
    """Where the first changed op's inputs go: beside report.json (the store is the report folder's
    baseline-outputs/)."""
    return Path(spec.params["store"]).parent / "first-divergent-op"


def _outputs_with_modules(inst: Instance) -> tuple[dict[str, torch.Tensor], list[tuple[str, torch.Tensor]]]:
    """Outputs (and gradients) plus each submodule's first output tensor, in execution order."""
    modules: list[tuple[str, torch.Tensor]] = []
    handles = []
    if isinstance(inst.model, torch.nn.Module):
        for name, module in inst.model.named_modules():
            if not name:
                continue

            def hook(_m: Any, _inp: Any, out: Any, name: str = name) -> None:
                first = next(iter(tensors.flatten(out).values()), None)
                if first is not None:
                    modules.append((name, tensors.host(first).clone()))

            handles.append(module.register_forward_hook(hook))
    try:
        outputs = forward_backward(inst)
    finally:
        for h in handles:
            h.remove()
    return outputs, modules


def _first_divergent(mine: list[tuple[str, torch.Tensor]], theirs: list[tuple[str, torch.Tensor]], rtol: float,
                     atol: float) -> dict[str, Any] | None:
    """The first module, in execution order, whose output leaves the tolerance around the baseline's (atol
    in units of that output's RMS, as everywhere)."""
    baseline = dict(theirs)
    for name, out in mine:
        ref = baseline.get(name)
        if ref is None or ref.shape != out.shape:
            continue
        ref64, out64 = ref.double(), out.double()
        diff = tensors.difference(out64, ref64)  # NaN where the baseline has NaN (a masked row) is no divergence
        if bool((diff > tensors.bounds(ref64, rtol=rtol, atol=atol, scale=tensors.scale_of(ref64) or 1.0)).any()):
            return {"module": name, "max_abs_err": float(diff.max())}
    return None
