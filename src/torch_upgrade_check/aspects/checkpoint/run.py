"""Checkpoints: what a training job saves, loaded with the default `torch.load` and resumed.

Upgrades broke resuming more than once: `torch.load`'s `weights_only` default became True in 2.6, so a
checkpoint holding a user class (a config, an optimizer wrapper) stopped loading until its classes were
allowed with `torch.serialization.add_safe_globals`; the CUDA RNG state changed size in 2.1, so restoring
a saved one failed. The check trains one step (AdamW, the inputs jittered with the device's random
numbers, as augmentation and dropout draw them), saves model and optimizer state_dicts, the RNG states
and the workload's `checkpoint_extra` object, and then:

- alone (`run`, and the baseline in `compare`): loads the file with the default `torch.load` and
  resumes the second step from it, which must be bitwise equal to the uninterrupted second step;
- mode "save" (the baseline): also writes the file and its uninterrupted second step for the candidate;
- mode "compare" (the candidate): loads the baseline's file with its own default `torch.load`, restores
  it and resumes; the second step must match the baseline's within the check's tolerances.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from torch_upgrade_check.model import CheckSpec
from torch_upgrade_check.worker import crossversion, first_line, randomness, tensors, torchload, training
from torch_upgrade_check.worker.devices import Device
from torch_upgrade_check.worker.instance import Instance, Skip, require_training, tolerances



def run(spec: CheckSpec, factory: Callable[..., Any], inst: Instance, device: Device) -> dict[str, Any]:
    require_training(inst, "checkpoint")
    with device.deterministic():  # two identical steps are bitwise equal only under deterministic algorithms
        if spec.params.get("mode") == "compare":
            return _resume_the_baselines(spec, factory, inst, device)
        return _alone(spec, factory, inst, device)


def _alone(spec: CheckSpec, factory: Callable[..., Any], inst: Instance, device: Device) -> dict[str, Any]:
    model, optimizer, inputs = training.trainable(factory, spec)
    training.step(model, optimizer, inst.loss, inputs)
    saved = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "rng": device.rng_states(), "step": 1}
    if inst.checkpoint_extra is not None:
        saved["extra"] = inst.checkpoint_extra
    with tempfile.TemporaryDirectory(prefix="tuc-checkpoint-") as tmp:
        path = _path(spec, "checkpoint") if spec.params.get("mode") == "save" else Path(tmp) / "checkpoint.pt"
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(saved, path)
        uninterrupted = training.state(model, training.step(model, optimizer, inst.loss, inputs))
        if spec.params.get("mode") == "save":
            torch.save({"torch": str(torch.__version__), "second_step": {k: tensors.host(v) for k, v in uninterrupted.items()},
                        "random_stream": json.dumps(training.random_stream(factory, spec, inst.loss))}, _path(spec, "second-step"))
        loaded, how = torchload.load(path)
        metrics = {"mode": spec.params.get("mode") or "alone", "contents": sorted(saved), "rng_states": sorted(saved["rng"]),
                   **how}
        if loaded is None:
            return metrics
        resumed = _resume(factory, spec, inst, device, loaded)
    if "resume_error" in resumed:
        return {**metrics, **resumed}
    return {**metrics, **tensors.bitwise_diff(uninterrupted, resumed)}


def _resume_the_baselines(spec: CheckSpec, factory: Callable[..., Any], inst: Instance, device: Device) -> dict[str, Any]:
    path, expected_path = _path(spec, "checkpoint"), _path(spec, "second-step")
    if not path.exists() or not expected_path.exists():
        raise Skip("the baseline saved no checkpoint for this check (it did not run there, or failed there)")
    expected = torch.load(expected_path, map_location="cpu", weights_only=True)
    loaded, how = torchload.load(path)
    metrics: dict[str, Any] = {"mode": "compare", "baseline_torch": expected["torch"], **how}
    if loaded is None:
        return metrics
    resumed = _resume(factory, spec, inst, device, loaded)
    if "resume_error" in resumed:
        return {**metrics, **resumed}
    rtol, atol = tolerances(spec, inst)
    close = tensors.compare(resumed, expected["second_step"], rtol=rtol, atol=atol)
    changed = randomness.first_change(json.loads(expected.get("random_stream") or "[]"),
                                      training.random_stream(factory, spec, inst.loss))
    if changed:
        metrics["random_stream_changed"] = changed
    return {**metrics, "rtol": rtol, "atol": atol, "max_abs_err": close["max_abs_err"],
            "mismatched_count": close["mismatched_count"], "uncompared": close.get("uncompared", []),
            **tensors.bitwise_diff(resumed, expected["second_step"])}


def _path(spec: CheckSpec, what: str) -> Path:
    return crossversion.store_path(spec).with_name(f"{crossversion.store_path(spec).stem}-{what}.pt")


def _resume(factory: Callable[..., Any], spec: CheckSpec, inst: Instance, device: Device,
            saved: dict[str, Any]) -> dict[str, Any]:
    """The second step of a fresh model and optimizer restored from `saved`, or {"resume_error": why}."""
    model, optimizer, inputs = training.trainable(factory, spec)
    stage = "model.load_state_dict"
    try:
        model.load_state_dict(saved["model"])
        stage = "optimizer.load_state_dict"
        optimizer.load_state_dict(saved["optimizer"])
        stage = "restoring the RNG states"
        device.set_rng_states(saved["rng"])
    except Exception as e:
        return {"resume_error": f"{stage}: {type(e).__name__}: {first_line(e)}"[:400]}
    return training.state(model, training.step(model, optimizer, inst.loss, inputs))  # type: ignore[arg-type]
