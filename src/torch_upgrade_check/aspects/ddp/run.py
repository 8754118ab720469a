"""DDP check under torchrun (worker/torchrun.py launches it): `DistributedDataParallel` training steps on 2 ranks
must match the unsharded single-process model by fsdp2's rule (each step's all-reduced gradients, each step's global
loss, the parameters after the steps); torchrun.py checks every rank's exit and the process group's shutdown. In
compare the candidate is also judged against the baseline's steps (worker/steps.py).
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from torch_upgrade_check.aspects.fsdp2 import run as fsdp2
from torch_upgrade_check.model import CheckSpec
from torch_upgrade_check.worker import devices, torchrun

# DDP all-reduces one bucket of every gradient in its first step, then rebuilds its buckets by this cap in the order
# the gradients were ready: a real model (25 MiB buckets) has many, and so, at 40 KiB, has this one (two of its
# 131 KiB: the feed-forward's and the attention's), so that a bucket reduced wrongly shows apart from the others
BUCKET_CAP_MB = 0.04


def run(spec: CheckSpec, device: devices.Device) -> dict[str, Any]:
    return torchrun.run(spec, device, "ddp", "DDP")


def train(dist: Any, rank: int, world: int, device: Any, dtype: torch.dtype,
          start: dict[str, Any] | None = None, record: bool = False) -> tuple[dict[str, Any], dict[str, Any]]:
    """DDP's steps beside the unsharded model's on this rank, by fsdp2's rule on whole gradients."""
    from torch.nn.parallel import DistributedDataParallel

    ref = fsdp2.starting_model(device, dtype, start)
    model = DistributedDataParallel(copy.deepcopy(ref), device_ids=[rank] if dist.get_backend() == "nccl" else None,
                                    bucket_cap_mb=BUCKET_CAP_MB)
    return fsdp2.compared(dist, model, model.module, ref, rank, world, device, dtype, sharded=False, start=start,
                          record=record)
