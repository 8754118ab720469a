"""The training job the checkpoint and training-curve aspects run: a freshly built workload (seeded, as every
build is) with AdamW, whose steps jitter the inputs with the device's random numbers (as augmentation and
dropout draw them), so that restoring the RNG state matters as it does in a real job."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from torch_upgrade_check.model import CheckSpec
from torch_upgrade_check.worker import randomness
from torch_upgrade_check.worker.devices import DTYPES
from torch_upgrade_check.worker.instance import build

JITTER = 0.01  # the scale of the random perturbation of each step's inputs
OPTIMIZER = "AdamW(lr=1e-3)"


def trainable(factory: Callable[..., Any], spec: CheckSpec) -> tuple[torch.nn.Module, torch.optim.Optimizer, tuple[Any, ...]]:
    """A fresh model, its optimizer and its inputs (detached: each step jitters its own copy)."""
    fresh = build(factory, spec.device, DTYPES[spec.dtype])
    model = fresh.model
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    return model, optimizer, tuple(x.detach() if isinstance(x, torch.Tensor) else x for x in fresh.inputs)


def step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, loss: Callable[[Any], torch.Tensor],
         inputs: tuple[Any, ...]) -> torch.Tensor:
    """One training step on jittered inputs; its loss, detached."""
    model.train()
    optimizer.zero_grad()
    jittered = tuple(x + JITTER * torch.randn_like(x) if isinstance(x, torch.Tensor) and x.is_floating_point() else x
                     for x in inputs)
    value = loss(model(*jittered))
    value.backward()
    optimizer.step()
    return value.detach()


def random_stream(factory: Callable[..., Any], spec: CheckSpec, loss: Callable[[Any], torch.Tensor]) -> list[dict[str, Any]]:
    """The random stream's fingerprint of this job's start: the seeded build and two steps (their jitter), as the
    training-curve and checkpoint aspects draw it."""
    def start() -> None:
        model, optimizer, inputs = trainable(factory, spec)
        for _ in range(2):
            step(model, optimizer, loss, inputs)

    try:
        return randomness.fingerprint(start)
    except Exception:  # the fingerprint only explains a failure: none (and no explanation) rather than a lost check
        return []


def state(model: torch.nn.Module, loss: torch.Tensor) -> dict[str, torch.Tensor]:
    """What a step leaves: its loss, and the parameters and buffers after it."""
    return {"loss": loss, **{f"param:{n}": p.detach().clone() for n, p in model.named_parameters()},
            **{f"buffer:{n}": b.detach().clone() for n, b in model.named_buffers()}}
