"""Mixed precision: one training step under `torch.autocast` (bfloat16; float16 with a GradScaler), against
the same step's fp64 golden.

Upgrades change autocast under a training job: an op moves between autocast's lists, a dtype stops being
offered on a device (torch then warns and quietly disables autocast, so the job runs in float32), the
GradScaler's overflow check goes wrong (a step whose gradients overflowed is applied, and the weights turn
to inf). For each autocast dtype the device offers, the check takes one SGD step of the float32 workload
from the same weights and inputs, and records:

- how many of the model's modules produced that dtype (none: autocast did nothing);
- the loss, the outputs, the parameters' gradients and the parameters after the step, against the fp64
  golden of the same step (closeness's low-precision rule: within the dtype's rounding error of the golden,
  times AMP_MULTIPLIER, since a step rounds at every op);
- float16 only: a step at a scale whose gradients overflow (2**40, or larger where the model's stay finite there),
  which the GradScaler must skip (the weights bitwise unchanged, the scale backed off), then steps at the default
  scale until one is applied.

Mode "save" (the baseline in `compare`) also writes its weights, inputs, results and fp64 golden; mode "compare"
(the candidate) takes the baseline's weights and inputs, is judged against the baseline's golden with the
baseline's results as the reference, and compares its own golden with the baseline's (`fp64_vs_baseline`).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from typing import Any

import torch

from torch_upgrade_check.model import CheckSpec
from torch_upgrade_check.worker import crossversion, rounding, tensors
from torch_upgrade_check.worker.devices import Device
from torch_upgrade_check.worker.instance import Instance, Skip, build, copy_to, grad_leaves, require_training

LR = 0.01  # SGD: the step is the gradient itself, so a gradient left scaled shows in the weights
OVERFLOW_SCALE = 2.0**40  # most float16 backwards overflow at this loss scale
# tried in turn until the scaled gradients hold an inf or NaN (the loss, about 1, stays finite in float32 at 2^120)
OVERFLOW_SCALES = (OVERFLOW_SCALE, 2.0**64, 2.0**96, 2.0**120)
DEFAULT_SCALE = 2.0**16  # GradScaler's own init_scale: the steps after the overflow start there
SCALED_ATTEMPTS = 8  # steps at the default scale (halved after each overflow) before giving up
AUTOCAST = {"bfloat16": torch.bfloat16, "float16": torch.float16}
ROUNDOFFS = 64.0  # aspects.amp.judge.AMP_ROUNDOFFS (a test holds them equal): within it, no yardstick is needed


def run(spec: CheckSpec, factory: Callable[..., Any], inst: Instance, device: Device) -> dict[str, Any]:
    if spec.dtype != "float32":
        raise Skip("amp runs the float32 workload under torch.autocast; this is its float32 checks' job")
    require_training(inst, "amp")
    mode = spec.params.get("mode") or "alone"
    path = crossversion.store_path(spec).with_suffix(".amp.pt") if mode != "alone" else None
    saved = None
    if path is not None and mode == "compare":
        if not path.exists():
            raise Skip("the baseline saved no amp results for this check (it did not run there, or failed there)")
        saved = torch.load(path, map_location="cpu", weights_only=True)
        crossversion.load_into(inst, saved, spec.device)
    gold = _step(_copy(factory, inst, "cpu", torch.float64))
    checked: dict[str, dict[str, Any]] = {}
    not_offered: dict[str, str] = {}
    results: dict[str, dict[str, torch.Tensor]] = {}
    for name, dtype in AUTOCAST.items():
        why = _not_offered(device, name)
        if why:
            not_offered[name] = why
            continue
        fresh = _copy(factory, inst, spec.device, torch.float32)
        scaler = _scaler(device) if name == "float16" else None
        if name == "float16" and scaler is None:
            not_offered[name] = f"this torch has no GradScaler for {device.name} (torch.amp.GradScaler({device.name!r}))"
            continue
        overflow = _overflow_step(fresh, device, dtype, scaler) if scaler is not None else {}
        got, low = _autocast_step(fresh, device, dtype, scaler)
        device.synchronize()
        results[name] = got
        reference = saved["results"].get(name) if saved is not None else None
        rtol, atol = tensors.DEFAULT_TOLERANCES[name]
        judged_by = saved["golden"] if saved is not None else gold  # the baseline's function, not this torch's
        checked[name] = {**tensors.compare(got, judged_by, reference=reference, rtol=rtol, atol=atol, dtype=name),
                         "rtol": rtol, "atol": atol, **low, **overflow, "loss": _finite(float(got["loss"]))}
        if _beyond_roundoffs(checked[name], name):  # the yardstick costs two steps: only where it is read
            own, why = _own_error(factory, inst, spec.device, device, dtype)
            if own is not None:
                tensors.add_model_error(checked[name], gold, own)
            else:
                checked[name]["no_yardstick"] = why
    if not checked:
        raise Skip("no autocast dtype is offered here: " + "; ".join(f"{k}: {v}" for k, v in not_offered.items()))
    metrics: dict[str, Any] = {"mode": mode, "checked": checked, "not_offered": not_offered, "optimizer": f"SGD(lr={LR})",
                               "autocast_device": device.name}
    if saved is not None:
        metrics["baseline_torch"] = saved["torch"]
        metrics["fp64_vs_baseline"] = crossversion.fp64_change(gold, saved["golden"])
    if path is not None and mode == "save":
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save({"torch": str(torch.__version__), **crossversion.saved_weights_and_inputs(inst),
                    "results": {n: {k: tensors.host(v) for k, v in r.items()} for n, r in results.items()},
                    "golden": {k: tensors.host(v) for k, v in gold.items()}}, path)
    return metrics


def _beyond_roundoffs(sub: dict[str, Any], name: str) -> bool:
    """Some tensor's error is beyond ROUNDOFFS unit roundoffs of its scale: the verdict then reads the model's own."""
    unit = rounding.UNIT[name]
    return any(not float(t["rmse"]) <= ROUNDOFFS * unit * (float(t["scale"]) or 1.0) for t in sub.get("per_tensor") or [])


def _not_offered(device: Device, name: str) -> str:
    support = device.supports_dtype(name)
    if not support.ok:
        return support.reason
    is_supported = getattr(torch.amp, "is_autocast_available", None)
    if is_supported is not None and not is_supported(device.name):
        return f"this torch has no autocast for {device.name}"
    return ""


def _copy(factory: Callable[..., Any], inst: Instance, device: str, dtype: torch.dtype) -> Instance:
    """A fresh build with `inst`'s weights and inputs: every step starts from the same point."""
    fresh = build(factory, device, dtype)
    copy_to(inst, fresh, dtype)
    fresh.loss = inst.loss
    return fresh


def _params(inst: Instance) -> list[torch.Tensor]:
    return [p for p in inst.model.parameters() if p.requires_grad]


def _forward_loss(inst: Instance) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    inst.model.eval()  # as forward_backward: no dropout, batch norm from its running statistics
    out = inst.model(*inst.inputs)
    return {k: v.detach() for k, v in tensors.flatten(out).items()}, inst.loss(out)  # type: ignore[misc]


def _state(inst: Instance, outputs: dict[str, torch.Tensor], loss: torch.Tensor,
           grads: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {**outputs, "loss": loss.detach(), **grads,
            **{f"param:{n}": p.detach().clone() for n, p in inst.model.named_parameters() if p.requires_grad}}


def _grads(inst: Instance) -> dict[str, torch.Tensor]:
    return {f"grad:{n}": p.grad.detach().clone() for n, p in grad_leaves(inst)
            if isinstance(p, torch.nn.Parameter) and p.grad is not None}


def _step(inst: Instance, within: contextlib.AbstractContextManager[Any] | None = None) -> dict[str, torch.Tensor]:
    """One plain SGD step (the golden: float64 on the CPU), all of it `within` the context given."""
    optimizer = torch.optim.SGD(_params(inst), lr=LR)
    with within or contextlib.nullcontext():
        outputs, loss = _forward_loss(inst)
        loss.backward()
        grads = _grads(inst)
        optimizer.step()
    return _state(inst, outputs, loss, grads)


def _own_error(factory: Callable[..., Any], inst: Instance, where: str, device: Device,
               dtype: torch.dtype) -> tuple[dict[str, torch.Tensor] | None, str]:
    """The model's own error at this precision (worker.rounding): which ops autocast runs in `dtype` (a forward and
    backward recorded on the device), then the fp64 step with those rounded to `dtype` and the rest to float32. None
    and why where it cannot be computed (a Python dispatch mode stops FlexAttention's internal compile): amp then
    keeps its fixed bound alone, and says so."""
    try:
        probe = _copy(factory, inst, where, torch.float32)
        with rounding.LowPrecisionOps(dtype) as recorded:
            with torch.autocast(device.name, dtype=dtype):
                _, loss = _forward_loss(probe)
            loss.backward()
        return _step(_copy(factory, inst, "cpu", torch.float64),
                     within=rounding.perturbed(torch.float32, low=frozenset(recorded.ops), low_dtype=dtype)), ""
    except Exception as e:  # the yardstick is an allowance: without it the check stands on its fixed bound
        return None, f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"


def _autocast_step(inst: Instance, device: Device, dtype: torch.dtype,
                   scaler: Any) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """One SGD step with the forward under autocast (and, with a scaler, the loss scaled and the gradients
    unscaled before they are read); and how many modules produced `dtype` under it."""
    optimizer = torch.optim.SGD(_params(inst), lr=LR)
    attempts = 0
    while True:
        attempts += 1
        optimizer.zero_grad()
        with _LowPrecisionModules(inst.model, dtype) as seen, torch.autocast(device.name, dtype=dtype):
            outputs, loss = _forward_loss(inst)
        if scaler is None:
            loss.backward()
            grads = _grads(inst)
            optimizer.step()
            break
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        grads = _grads(inst)
        before = float(scaler.get_scale())
        scaler.step(optimizer)
        scaler.update()
        applied = float(scaler.get_scale()) >= before  # an overflow halves the scale and skips the step
        if applied or attempts >= SCALED_ATTEMPTS:
            break
    low: dict[str, Any] = {"modules": seen.modules, "low_precision_modules": seen.low}
    if scaler is not None:
        low.update(scaled_attempts=attempts, loss_scale=before, scaled_step_applied=applied)
    return _state(inst, outputs, loss, grads), low


def _overflow_step(inst: Instance, device: Device, dtype: torch.dtype, scaler: Any) -> dict[str, Any]:
    """A step at a loss scale that overflows float16: the scaler must skip it and back the scale off.

    Whether the scaled backward overflowed is read from the gradients themselves, not from the scaler under test: a
    model whose float16 gradients stay finite at 2^40 (a small BERT's, on the CPU) is tried at larger scales, and
    one that overflows at none is said (`overflow_exercised` false), never counted as a step wrongly applied."""
    params = _params(inst)
    optimizer = torch.optim.SGD(params, lr=LR)
    before = [p.detach().clone() for p in params]
    for scale in OVERFLOW_SCALES:
        if scale != OVERFLOW_SCALE:  # the scaler starts there; update() before its first scale() raises
            scaler.update(new_scale=scale)
        optimizer.zero_grad()
        with torch.autocast(device.name, dtype=dtype):
            _, loss = _forward_loss(inst)
        scaler.scale(loss).backward()
        if not all(bool(torch.isfinite(p.grad).all()) for p in params if p.grad is not None):
            break
    else:
        optimizer.zero_grad()
        scaler.update(new_scale=DEFAULT_SCALE)
        return {"overflow_scale": OVERFLOW_SCALES[-1], "overflow_exercised": False}
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad()
    unchanged = all(tensors.bitwise_equal(a, b) for a, b in zip(before, params))
    finite = all(bool(torch.isfinite(p).all()) for p in params)
    backed_off = float(scaler.get_scale()) < scale
    with torch.no_grad():  # put back what a wrongly applied step changed: the next step starts from the same point
        for p, b in zip(params, before):
            p.copy_(b)
    scaler.update(new_scale=DEFAULT_SCALE)
    return {"overflow_scale": scale, "overflow_skipped": unchanged, "overflow_backed_off": backed_off,
            "weights_finite_after_overflow": finite, "overflow_exercised": True}


def _scaler(device: Device) -> Any:
    """A GradScaler for the device, starting at OVERFLOW_SCALE; None where this torch has none."""
    grad_scaler = getattr(torch.amp, "GradScaler", None)
    try:
        if grad_scaler is not None:
            return grad_scaler(device.name, init_scale=OVERFLOW_SCALE)
        if device.name == "cuda":  # before torch 2.3
            return torch.cuda.amp.GradScaler(init_scale=OVERFLOW_SCALE)
    except Exception:  # this torch's GradScaler does not take the device
        return None
    return None


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


class _LowPrecisionModules:
    """Counts the model's modules whose output is `dtype` while it is entered: autocast's visible effect."""

    def __init__(self, model: torch.nn.Module, dtype: torch.dtype) -> None:
        self.model, self.dtype, self.modules, self.low, self.handles = model, dtype, 0, 0, []

    def __enter__(self) -> _LowPrecisionModules:
        for _, module in self.model.named_modules():
            self.handles.append(module.register_forward_hook(self._hook))
        return self

    def _hook(self, _module: Any, _inputs: Any, out: Any) -> None:
        self.modules += 1
        if any(t.dtype == self.dtype for t in tensors.flatten(out).values()):
            self.low += 1

    def __exit__(self, *exc: object) -> None:
        for handle in self.handles:
            handle.remove()
