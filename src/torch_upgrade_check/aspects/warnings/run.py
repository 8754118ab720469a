"""The warnings aspect's worker side: the warnings a workload raised, building it, one forward and backward here,
and every check of it that ran before in this worker (the aspect is planned after the workload's others)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from torch_upgrade_check.model import CheckSpec
from torch_upgrade_check.worker import warned
from torch_upgrade_check.worker.devices import Device
from torch_upgrade_check.worker.instance import Instance, forward_backward


def run(spec: CheckSpec, factory: Callable[..., Any], inst: Instance, device: Device) -> dict[str, Any]:
    """The warnings this workload raised: building it and one forward and backward here, and every check of it
    that ran before in this worker (the aspect is planned after the workload's others)."""
    if isinstance(inst.model, torch.nn.Module):
        inst.model.train()
    forward_backward(inst)
    device.synchronize()
    return {"warnings": warned.seen(spec)}
