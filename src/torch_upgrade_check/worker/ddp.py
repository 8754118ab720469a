"""DDP check under torchrun (worker/torchrun.py launches it): `DistributedDataParallel` training steps on 2 ranks
must match the unsharded single-process model by fsdp2's rule (each step's all-reduced gradients, each step's global
loss, the parameters after the steps); torchrun.py checks every rank's exit and the process group's shutdown.
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from torch_upgrade_check.model import CheckSpec
from torch_upgrade_check.worker import devices, fsdp2, torchrun


def run(spec: CheckSpec, device: devices.Device) -> dict[str, Any]:
    return torchrun.run(spec, device, "ddp", "DDP")


def train(dist: Any, rank: int, world: int, device: Any, dtype: torch.dtype) -> dict[str, Any]:
    """DDP's steps beside the unsharded model's on this rank, by fsdp2's rule on whole gradients."""
    from torch.nn.parallel import DistributedDataParallel

    from torch_upgrade_check.worker.workloads import transformer_block

    torch.manual_seed(0)
    ref = transformer_block(device, dtype)["model"]
    model = DistributedDataParallel(copy.deepcopy(ref), device_ids=[rank] if dist.get_backend() == "nccl" else None)
    return fsdp2.compared(dist, model, model.module, ref, rank, world, device, dtype, sharded=False)
