"""The determinism aspect's worker side: two seeded training steps from scratch under deterministic algorithms,
compared bitwise (imports torch)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from torch_upgrade_check.model import CheckSpec
from torch_upgrade_check.worker import tensors
from torch_upgrade_check.worker.devices import DTYPES, Device
from torch_upgrade_check.worker.instance import Instance, Skip, build, grad_leaves


def run(spec: CheckSpec, factory: Callable[..., Any], inst: Instance, device: Device) -> dict[str, Any]:
    """Two seeded training steps from scratch must be bitwise equal under deterministic algorithms."""
    if inst.loss is None:
        raise Skip("the workload has no loss, and determinism needs a training step: add 'loss' to the factory")
    with device.deterministic():
        first = _train_step(factory, spec, device)
        second = _train_step(factory, spec, device)
    return tensors.bitwise_diff(first, second)


def _train_step(factory: Callable[..., Any], spec: CheckSpec, device: Device) -> dict[str, torch.Tensor]:
    inst = build(factory, spec.device, DTYPES[spec.dtype])
    if inst.loss is None:
        raise Skip(inst.skip.get("gradients", "the workload has no loss"))
    model = inst.model
    params = [p for p in model.parameters() if p.requires_grad] if isinstance(model, torch.nn.Module) else []
    if isinstance(model, torch.nn.Module):
        model.train()
    loss = inst.loss(model(*inst.inputs))
    loss.backward()
    named = {"loss": loss.detach()}
    named.update({f"grad:{n}": leaf.grad.detach().clone() for n, leaf in grad_leaves(inst) if leaf.grad is not None})
    if params:
        torch.optim.SGD(params, lr=0.01, momentum=0.9).step()
        named.update({f"param:{n}": p.detach().clone() for n, p in model.named_parameters()})
    device.synchronize()
    return named
