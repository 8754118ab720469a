"""FSDP2 check under torchrun (worker/torchrun.py launches it, and checks every rank's exit and the process group's
shutdown): `fully_shard` training steps across ranks must match the unsharded model: each step's reduced gradient
shards against the same slice of the unsharded model's gradients, each step's global loss against the unsharded
model's, and the parameters after the steps. `compared` is DDP's rule too (aspects/ddp/run.py), its gradients whole. In
compare both sides record their steps (worker/steps.py): the candidate is also judged against the baseline's.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import torch

from torch_upgrade_check.model import CheckSpec
from torch_upgrade_check.worker import devices, steps, torchrun

STEPS = 3
LR = 0.05


def run(spec: CheckSpec, device: devices.Device) -> dict[str, Any]:
    return torchrun.run(spec, device, "fsdp2", "FSDP2")


def train(dist: Any, rank: int, world: int, device: Any, dtype: torch.dtype,
          start: dict[str, Any] | None = None, record: bool = False) -> tuple[dict[str, Any], dict[str, Any]]:
    """FSDP2's steps (every layer and the model fully_shard-ed) beside the unsharded model's on this rank."""
    from torch.distributed.fsdp import fully_shard

    ref = starting_model(device, dtype, start)
    model = copy.deepcopy(ref)
    for layer in model.children():
        if any(p.requires_grad for p in layer.parameters()):
            fully_shard(layer)
    fully_shard(model)
    return compared(dist, model, model, ref, rank, world, device, dtype, sharded=True, start=start, record=record)


def starting_model(device: Any, dtype: torch.dtype, start: dict[str, Any] | None) -> torch.nn.Module:
    """The unsharded model both trainers start from: seeded, or (compare's candidate) the baseline's own weights,
    so that both torches train exactly the same function whatever their random streams."""
    from torch_upgrade_check.worker.workloads import transformer_block

    torch.manual_seed(0)
    ref = transformer_block(device, dtype)["model"]
    if start is not None:
        ref.load_state_dict({k: v.to(device, dtype) for k, v in start["state"].items()})
    return ref


def compared(dist: Any, model: torch.nn.Module, inner: torch.nn.Module, ref: torch.nn.Module, rank: int, world: int,
             device: Any, dtype: torch.dtype, *, sharded: bool, start: dict[str, Any] | None = None,
             record: bool = False) -> tuple[dict[str, Any], dict[str, Any]]:
    """STEPS SGD steps of the wrapped `model` on this rank's rows beside the unsharded `ref` on every rank's rows,
    judged as the metrics rank 0 reports: each step's reduced gradients (`inner`'s, this rank's shard when
    `sharded`, else whole) and global loss, and the parameters after the steps. With `record` (compare's sides),
    also what the wrapped model computed and its fp64 golden (steps.Recorder), for the other side; `start` is
    the baseline's record: its batches replace the seeded ones (its weights: `starting_model`)."""
    recorder = steps.Recorder(ref, world, LR, keeps=rank == 0) if record else None
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=LR)
    loss_err = {"abs": 0.0, "rel": 0.0, "step": 0}
    worst = {"grad_err": 0.0, "grad_index": -1, "grad_step": 0, "grad_shards": 0, "unmatched": 0, "unmatched_index": -1}
    for step in range(STEPS):
        batch, project = steps.batch(step, world, start)
        batch, project = batch.to(device, dtype), project.to(device, dtype)
        rows = slice(rank * 2, (rank + 1) * 2)
        loss = (model(batch[rows]).float() * project[rows].float()).mean()
        loss.backward()  # FSDP2 reduce-scatters, DDP all-reduces (averages) the gradients here
        # the mean over every rank's data = the mean of the ranks' means, which the averaged gradient is
        ref_loss = (ref(batch).float() * project.float()).mean()
        ref_loss.backward()
        _worst_shard(inner, ref, rank if sharded else 0, world if sharded else 1, step, worst)  # whole: 1 slice
        global_loss = loss.detach().clone()
        dist.all_reduce(global_loss)
        if recorder is not None:
            recorder.step(step, inner, global_loss / world, batch, project)
        opt.step()
        opt.zero_grad()
        ref_opt.step()
        ref_opt.zero_grad()
        _worse_loss(loss_err, float(global_loss) / world, float(ref_loss), step)
    names = [n for n, _ in inner.named_parameters()]
    gathered = _every_ranks_worst(dist, worst, world, device, names)
    max_err, max_rel = _parameters_error(inner, ref)
    # report.json is strict JSON: an infinite or NaN error goes as the string "inf" or "nan"
    result = {"max_abs_err": _number(max_err), "max_rel_err": _number(max_rel),
              "max_loss_err": _number(loss_err["abs"]), "max_loss_rel_err": _number(loss_err["rel"]),
              "worst_loss_step": loss_err["step"], "steps": STEPS, **gathered}
    return result, (recorder.finish(inner) if recorder is not None else {})


def _worse(a: float, b: float) -> float:
    """The larger error, NaN the worst of all: max() keeps its first argument against a NaN, and read a NaN
    parameter or loss as no error at all."""
    return math.nan if math.isnan(a) or math.isnan(b) else max(a, b)


def _number(value: float) -> float | str:
    return value if math.isfinite(value) else str(value)


def _worse_loss(err: dict[str, Any], sharded: float, unsharded: float, step: int) -> None:
    """The sharded model's global loss (the ranks' all-reduced mean) against the unsharded model's, this step."""
    diff = abs(sharded - unsharded)
    rel = diff / abs(unsharded) if unsharded else (0.0 if diff == 0 else math.inf)
    if not math.isnan(err["abs"]) and (math.isnan(diff) or diff > err["abs"]):
        err["step"] = step + 1
    err["abs"], err["rel"] = _worse(err["abs"], diff), _worse(err["rel"], rel)


def _parameters_error(model: torch.nn.Module, ref: torch.nn.Module) -> tuple[float, float]:
    """The gathered parameters after the steps against the unsharded model's: max abs and max rel error."""
    max_err, max_rel = 0.0, 0.0
    for p, rp in zip(model.parameters(), ref.parameters()):
        full = p.full_tensor() if hasattr(p, "full_tensor") else p
        diff = (full.detach().double() - rp.detach().double()).abs()
        max_err = _worse(max_err, float(diff.max()))
        max_rel = _worse(max_rel, float((diff / rp.detach().double().abs().clamp_min(1e-12)).max()))
    return max_err, max_rel


def _every_ranks_worst(dist: Any, worst: dict[str, Any], world: int, device: Any, names: list[str]) -> dict[str, Any]:
    """Every rank's worst shard and its shards that could not be compared, gathered (as numbers: all_gather_object
    needs NumPy), as the metrics rank 0 reports."""
    keys = ("grad_err", "grad_index", "grad_step", "grad_shards", "unmatched", "unmatched_index")
    mine = torch.tensor([float(worst[k]) for k in keys], dtype=torch.float64, device=device)
    every_rank = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(every_rank, mine)
    found = [dict(zip(keys, t.tolist())) for t in every_rank]
    top = max(range(world), key=lambda r: found[r]["grad_err"])
    unmatched = next((int(row["unmatched_index"]) for row in found if row["unmatched_index"] >= 0), -1)
    err = found[top]["grad_err"]
    return {"max_grad_err": _number(err), "worst_grad": names[int(found[top]["grad_index"])]
            if found[top]["grad_index"] >= 0 else "", "worst_grad_step": int(found[top]["grad_step"]),
            "worst_grad_rank": top, "grad_shards_compared": int(sum(row["grad_shards"] for row in found)),
            "grad_shards_unmatched": int(sum(row["unmatched"] for row in found)),
            "unmatched_grad": names[unmatched] if unmatched >= 0 else ""}


def _worst_shard(model: torch.nn.Module, ref: torch.nn.Module, rank: int, world: int, step: int,
                 worst: dict[str, Any]) -> None:
    """Each parameter's reduced gradient shard on this rank (what the reduce-scatter left there) against the same
    slice of the unsharded model's gradient, as max |shard - expected| / RMS(the whole unsharded gradient): the
    error a collective adds shows at its own size, before three optimizer steps blur it. The slice is torch.chunk's
    along the dimension the shard's placement names (FSDP2 shards dim 0 unless told otherwise); a shard of another
    shape is counted as unmatched, never skipped: nothing produced passes unexamined."""
    for index, (p, rp) in enumerate(zip(model.parameters(), ref.parameters())):
        if p.grad is None or rp.grad is None:
            continue
        shard = p.grad.to_local() if hasattr(p.grad, "to_local") else p.grad
        expected = _expected_shard(p.grad, rp.grad, rank, world)
        if expected is None or tuple(shard.shape) != tuple(expected.shape):
            worst["unmatched"] += 1
            worst["unmatched_index"] = index if worst["unmatched_index"] < 0 else worst["unmatched_index"]
            continue
        if not shard.numel():  # this rank holds no rows of it (more ranks than rows): nothing to compare
            continue
        scale = float(rp.grad.double().pow(2).mean().sqrt()) or 1.0
        err = float((shard.double() - expected.double()).abs().max()) / scale
        err = math.inf if math.isnan(err) else err  # a NaN shard is the worst there is
        worst["grad_shards"] += 1
        if err > worst["grad_err"]:
            worst.update(grad_err=err, grad_index=index, grad_step=step + 1)


def _expected_shard(grad: torch.Tensor, full: torch.Tensor, rank: int, world: int) -> torch.Tensor | None:
    """This rank's slice of the unsharded gradient where the sharded one is sharded along one dimension, else None."""
    placements = getattr(grad, "placements", None)
    if placements is None:
        dim = 0  # a plain tensor (no DTensor): FSDP2's default placement
    else:
        from torch.distributed.tensor import Shard

        dims = [pl.dim for pl in placements if isinstance(pl, Shard)]
        if len(dims) != 1:
            return None
        dim = dims[0]
    chunks = torch.chunk(full, world, dim=dim)
    if rank < len(chunks):
        return chunks[rank]
    return full.new_empty(tuple(0 if d == dim else n for d, n in enumerate(full.shape)))

