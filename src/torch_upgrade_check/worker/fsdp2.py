"""FSDP2 check: `fully_shard` training steps across ranks must match the unsharded model: each step's reduced
gradient shards against the same rows of the unsharded model's gradients, and the parameters after the steps.

`run` (inside the worker) starts one process per rank running this module's `main`; gloo on CPU,
NCCL on CUDA. Rank 0 writes the comparison to a JSON file.
"""

from __future__ import annotations

import copy
import json
import math
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from torch_upgrade_check.model import CheckSpec
from torch_upgrade_check.worker import devices
from torch_upgrade_check.worker.instance import Skip

STEPS = 3
RANK_TIMEOUT_S = 180


def run(spec: CheckSpec, device: devices.Device) -> dict[str, Any]:
    group = device.process_group()
    if not group.ok:
        raise Skip(group.reason)
    backend, world = group.backend, group.world
    with tempfile.TemporaryDirectory(prefix="tuc-fsdp2-") as tmp:
        out = Path(tmp) / "result.json"
        env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port()), "WORLD_SIZE": str(world)}
        logs = [Path(tmp) / f"rank{r}.log" for r in range(world)]
        procs = []
        for rank in range(world):
            with logs[rank].open("w") as log:
                cmd = [sys.executable, "-m", "torch_upgrade_check.worker.fsdp2", backend, spec.device, spec.dtype, str(out)]
                procs.append(subprocess.Popen(cmd, env={**env, "RANK": str(rank)}, stdout=log, stderr=subprocess.STDOUT))
        deadline = time.monotonic() + RANK_TIMEOUT_S
        codes = [_wait(p, deadline) for p in procs]
        if any(c != 0 for c in codes) or not out.exists():
            tails = "\n".join(f"--- rank {r} (exit {c}) ---\n{_tail(logs[r])}" for r, c in enumerate(codes))
            raise RuntimeError(f"FSDP2 ranks exited with {codes} (None = killed after {RANK_TIMEOUT_S}s)\n{tails}")
        result = json.loads(out.read_text())
    return {**result, "world_size": world, "backend": backend, "steps": STEPS}


def _wait(proc: subprocess.Popen[bytes], deadline: float) -> int | None:
    try:
        return proc.wait(timeout=max(0.1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return None


def _tail(path: Path, lines: int = 20) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(backend: str, device: str, dtype_name: str, out: str) -> None:
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard

    from torch_upgrade_check.worker.workloads import transformer_block

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    device = devices.get(device).rank_device(rank)
    dist.init_process_group(backend, rank=rank, world_size=world)
    dtype = devices.DTYPES[dtype_name]
    torch.manual_seed(0)
    ref = transformer_block(device, dtype)["model"]
    model = copy.deepcopy(ref)
    for layer in model.children():
        if any(p.requires_grad for p in layer.parameters()):
            fully_shard(layer)
    fully_shard(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.05)
    max_loss_err = 0.0
    worst = {"grad_err": 0.0, "grad_index": -1, "grad_step": 0, "grad_shards": 0}
    for step in range(STEPS):
        gen = torch.Generator().manual_seed(1000 + step)
        batch = torch.randn(world * 2, 16, 64, generator=gen).to(device, dtype)
        # a projection on fixed random weights (as the workloads' loss): a mean of squares after the layer's
        # final LayerNorm is ~1 whatever the weights, and its gradients are rounding noise
        project = torch.randn(batch.shape, generator=gen).to(device, dtype)
        rows = slice(rank * 2, (rank + 1) * 2)
        loss = (model(batch[rows]).float() * project[rows].float()).mean()
        loss.backward()
        # the mean over every rank's data = the mean of the ranks' means, which FSDP's averaged gradient is
        ref_loss = (ref(batch).float() * project.float()).mean()
        ref_loss.backward()
        _worst_shard(model, ref, rank, world, step, worst)
        opt.step()
        opt.zero_grad()
        ref_opt.step()
        ref_opt.zero_grad()
        global_loss = loss.detach().clone()
        dist.all_reduce(global_loss)
        max_loss_err = max(max_loss_err, abs(float(global_loss) / world - float(ref_loss)))
    # rank 0 reports every rank's worst shard (as numbers: all_gather_object needs NumPy)
    mine = torch.tensor([worst["grad_err"], worst["grad_index"], worst["grad_step"], worst["grad_shards"]],
                        dtype=torch.float64, device=device)
    every_rank = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(every_rank, mine)
    found = [t.tolist() for t in every_rank]
    err, index, step_no, _ = max(found, key=lambda row: row[0])
    names = [n for n, _ in model.named_parameters()]
    worst = {"grad_err": err, "grad_worst": names[int(index)] if index >= 0 else "", "grad_step": int(step_no),
             "rank": max(range(world), key=lambda r: found[r][0]), "grad_shards": int(sum(row[3] for row in found))}
    max_err, max_rel = 0.0, 0.0
    for p, rp in zip(model.parameters(), ref.parameters()):
        full = p.full_tensor() if hasattr(p, "full_tensor") else p
        diff = (full.detach().double() - rp.detach().double()).abs()
        max_err = max(max_err, float(diff.max()))
        max_rel = max(max_rel, float((diff / rp.detach().double().abs().clamp_min(1e-12)).max()))
    if rank == 0:
        tmp = out + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"max_abs_err": max_err, "max_rel_err": max_rel, "max_loss_err": max_loss_err,
                       # report.json is strict JSON: an infinite error goes as the string "inf"
                       "max_grad_err": worst["grad_err"] if math.isfinite(worst["grad_err"]) else "inf",
                       "worst_grad": worst["grad_worst"],
                       "worst_grad_step": worst["grad_step"], "worst_grad_rank": worst["rank"],
                       "grad_shards_compared": worst["grad_shards"]}, f)
        os.replace(tmp, out)
    dist.barrier()
    dist.destroy_process_group()


def _worst_shard(model: torch.nn.Module, ref: torch.nn.Module, rank: int, world: int, step: int,
                 worst: dict[str, Any]) -> None:
    """Each parameter's reduced gradient shard on this rank (what the reduce-scatter left there) against the same
    rows of the unsharded model's gradient, as max |shard - expected| / RMS(the whole unsharded gradient): the
    error a collective adds shows at its own size, before three optimizer steps blur it."""
    for index, (p, rp) in enumerate(zip(model.parameters(), ref.parameters())):
        if p.grad is None or rp.grad is None:
            continue
        shard = p.grad.to_local() if hasattr(p.grad, "to_local") else p.grad
        chunks = torch.chunk(rp.grad, world, dim=0)  # FSDP2 shards dim 0 as torch.chunk does
        expected = chunks[rank] if rank < len(chunks) else rp.grad.new_empty((0, *rp.grad.shape[1:]))
        if tuple(shard.shape) != tuple(expected.shape) or not shard.numel():
            continue
        scale = float(rp.grad.double().pow(2).mean().sqrt()) or 1.0
        err = float((shard.double() - expected.double()).abs().max()) / scale
        err = math.inf if math.isnan(err) else err  # a NaN shard is the worst there is
        worst["grad_shards"] += 1
        if err > worst["grad_err"]:
            worst.update(grad_err=err, grad_index=index, grad_step=step + 1)


if __name__ == "__main__":
    main(*sys.argv[1:5])
