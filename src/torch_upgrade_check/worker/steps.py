"""What a distributed check's trained model computed, kept for compare's other side (aspects/fsdp2/run.py, aspects/ddp/run.py):
each step's global loss and reduced gradients, the parameters after the steps, each beside its fp64 golden (the
unsharded model trained in float64 on the CPU from the same weights and batches), with the starting weights and the
batches. The baseline saves it; the candidate starts from the baseline's weights and batches and is judged by the
cross-version rule against the baseline's golden, the baseline's own error its noise floor (worker/crossversion.py).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import torch

from torch_upgrade_check.worker import tensors


def batch(step: int, world: int, start: dict[str, Any] | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Step `step`'s batch (2 rows a rank) and its loss's projection: seeded, or the baseline's (`start`)."""
    if start is not None:
        return start["batches"][step], start["projects"][step]
    gen = torch.Generator().manual_seed(1000 + step)
    rows = torch.randn(world * 2, 16, 64, generator=gen)
    # a projection on fixed random weights (as the workloads' loss): a mean of squares after the layer's final
    # LayerNorm is ~1 whatever the weights, and its gradients are rounding noise
    return rows, torch.randn(rows.shape, generator=gen)


def _kept(t: torch.Tensor) -> torch.Tensor:
    """A copy on the host that training cannot change (tensors.host of a CPU tensor shares its storage), a DTensor
    gathered first (a collective: every rank calls it)."""
    return tensors.host(t.full_tensor() if hasattr(t, "full_tensor") else t).clone()


class Recorder:
    """The wrapped model's steps as the ranks computed them, and the fp64 golden's beside them. Every rank calls step
    and finish (gathering a shard is a collective); only the one that `keeps` (rank 0) records and trains the golden."""

    def __init__(self, ref: torch.nn.Module, world: int, lr: float, keeps: bool) -> None:
        self.world, self.keeps = world, keeps
        self.state = {k: _kept(v) for k, v in ref.state_dict().items()}
        self.gold = copy.deepcopy(ref).to("cpu", torch.float64)
        self.gold_opt = torch.optim.SGD(self.gold.parameters(), lr=lr)
        self.batches: list[torch.Tensor] = []
        self.projects: list[torch.Tensor] = []
        self.outputs: dict[str, torch.Tensor] = {}
        self.golden: dict[str, torch.Tensor] = {}

    def step(self, step: int, model: torch.nn.Module, global_loss: torch.Tensor, rows: torch.Tensor,
             project: torch.Tensor) -> None:
        """Step `step`'s global loss and reduced gradients (before the optimizer uses them), and the golden's."""
        n = step + 1
        grads = {f"grad:step{n}:{name}": _kept(p.grad) for name, p in model.named_parameters() if p.grad is not None}
        if not self.keeps:
            return
        self.batches.append(_kept(rows))
        self.projects.append(_kept(project))
        self.outputs[f"loss:step{n}"] = _kept(global_loss.float())
        self.outputs.update(grads)
        gold_loss = (self.gold(rows.double().cpu()) * project.double().cpu()).mean()
        gold_loss.backward()
        self.golden[f"loss:step{n}"] = gold_loss.detach()
        for name, p in self.gold.named_parameters():
            if p.grad is not None:
                self.golden[f"grad:step{n}:{name}"] = p.grad.detach().clone()
        self.gold_opt.step()
        self.gold_opt.zero_grad()

    def finish(self, model: torch.nn.Module) -> dict[str, Any]:
        """The record: the parameters after the steps (and the golden's) added; {} on a rank that does not keep it."""
        params = {f"param:{name}": _kept(p.detach()) for name, p in model.named_parameters()}
        if not self.keeps:
            return {}
        self.outputs.update(params)
        for name, p in self.gold.named_parameters():
            self.golden[f"param:{name}"] = p.detach().clone()
        return {"torch": str(torch.__version__), "world": self.world, "state": self.state, "batches": self.batches,
                "projects": self.projects, "outputs": self.outputs, "golden": self.golden}


def load(path: Path) -> dict[str, Any]:
    return torch.load(path, map_location="cpu", weights_only=True)


def against_baseline(mine: dict[str, Any], theirs: dict[str, Any], dtype: str) -> dict[str, Any]:
    """This side's record against the baseline's by the cross-version rule, at the dtype's tolerances."""
    from torch_upgrade_check.worker import crossversion

    rtol, atol = tensors.DEFAULT_TOLERANCES[dtype]
    found = crossversion.against_baseline(mine["outputs"], mine["golden"], theirs, rtol=rtol, atol=atol, dtype=dtype)
    return {**found, "rtol": rtol, "atol": atol, "baseline_torch": theirs["torch"]}
