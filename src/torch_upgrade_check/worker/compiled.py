"""The workload as torch.compile gives it to the checks that run it compiled (compile-cache, compiled-latency): one
place that compiles it, so that how a team compiles (its options) is honoured alike by every such check."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from torch_upgrade_check.model import CheckSpec
from torch_upgrade_check.worker.instance import Instance, Skip, grad_leaves


def compiled_model(inst: Instance, spec: CheckSpec) -> Any:
    """`torch.compile` of the workload's model, as the team compiles it (today: torch.compile's defaults)."""
    return torch.compile(inst.model)


def step(inst: Instance, compiled: Any) -> dict[str, torch.Tensor]:
    """The gradients of the workload's loss through the compiled model (its backward is compiled too)."""
    leaves = grad_leaves(inst)
    with torch.enable_grad():
        out = compiled(*inst.inputs)
        grads = torch.autograd.grad(inst.loss(out), [t for _, t in leaves], allow_unused=True)  # type: ignore[misc]
    return {f"grad:{name}": g.detach() for (name, _), g in zip(leaves, grads) if g is not None}


def fresh_inductor_cache() -> Callable[..., Any]:
    """torch's own context manager for a temporary, empty Inductor cache (fresh_cache; before torch 2.7
    fresh_inductor_cache)."""
    from torch._inductor import utils

    fresh = getattr(utils, "fresh_cache", None) or getattr(utils, "fresh_inductor_cache", None)
    if fresh is None:
        raise Skip(f"torch {torch.__version__} has no fresh Inductor cache to compile cold in")
    return fresh


def graphs_compiled() -> int:
    """Dynamo's count of the graphs this process compiled (it survives torch._dynamo.reset)."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])
