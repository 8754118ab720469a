"""The training curve: N seeded training steps, twice, and the loss after each.

Some upgrades change nothing one step shows and much that fifty do: an optimizer's update, a kernel's
rounding that training amplifies. Each run builds the workload afresh under the same seed and takes
`training` steps: AdamW on inputs jittered with the device's random numbers.
The two runs' difference is what this device's nondeterminism alone does to the curve (zero on a CPU);
compare judges the candidate's curve against the baseline's with it (analysis.verdicts).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import torch

from torch_upgrade_check.model import CheckSpec
from torch_upgrade_check.worker import crossversion, randomness, training
from torch_upgrade_check.worker.devices import Device
from torch_upgrade_check.worker.instance import Instance, Skip, require_training

DEFAULT_STEPS = 50


def run(spec: CheckSpec, factory: Callable[..., Any], inst: Instance, device: Device) -> dict[str, Any]:
    require_training(inst, "training-curve")
    steps = int(spec.params.get("steps") or DEFAULT_STEPS)
    mode = spec.params.get("mode") or "alone"
    metrics: dict[str, Any] = {"mode": mode, "steps": steps, "optimizer": training.OPTIMIZER,
                               "losses": _curve(factory, spec, device, steps, inst.loss),
                               "second_run": _curve(factory, spec, device, steps, inst.loss)}
    path = crossversion.store_path(spec).with_suffix(".curve.json") if mode != "alone" else None
    stream = training.random_stream(factory, spec, inst.loss) if mode != "alone" else []
    if mode == "save" and path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"torch": str(torch.__version__), "losses": metrics["losses"],
                                    "second_run": metrics["second_run"], "random_stream": stream}))
    elif mode == "compare" and path is not None:
        if not path.exists():
            raise Skip("the baseline saved no training curve for this check (it did not run there, or failed there)")
        saved = json.loads(path.read_text())
        if len(saved["losses"]) != steps:
            raise Skip(f"the baseline's curve has {len(saved['losses'])} steps, this one {steps}")
        metrics.update(baseline_torch=saved["torch"], baseline_losses=saved["losses"],
                       baseline_second_run=saved["second_run"], random_draws=len(stream))
        changed = randomness.first_change(saved.get("random_stream") or [], stream)
        if changed:
            metrics["random_stream_changed"] = changed
    return metrics


def _curve(factory: Callable[..., Any], spec: CheckSpec, device: Device, steps: int, loss: Any) -> list[float | None]:
    model, optimizer, inputs = training.trainable(factory, spec)  # seeded: both runs start alike
    losses = [float(training.step(model, optimizer, loss, inputs)) for _ in range(steps)]
    device.synchronize()
    return [x if math.isfinite(x) else None for x in losses]  # None: NaN or inf (report.json is strict JSON)
