"""FSDP2 check: `fully_shard` training steps across ranks must match the unsharded model.

`run` (inside the worker) starts one process per rank running this module's `main`; gloo on CPU,
NCCL on CUDA. Rank 0 writes the comparison to a JSON file.
"""

from __future__ import annotations

import copy
import json
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
    for step in range(STEPS):
        gen = torch.Generator().manual_seed(1000 + step)
        batch = torch.randn(world * 2, 16, 64, generator=gen).to(device, dtype)
        local = batch[rank * 2 : (rank + 1) * 2]
        loss = model(local).float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        ref_loss = ref(batch).float().pow(2).mean()  # mean over all ranks' data = FSDP's averaged gradient
        ref_loss.backward()
        ref_opt.step()
        ref_opt.zero_grad()
        global_loss = loss.detach().clone()
        dist.all_reduce(global_loss)
        max_loss_err = max(max_loss_err, abs(float(global_loss) / world - float(ref_loss)))
    max_err, max_rel = 0.0, 0.0
    for p, rp in zip(model.parameters(), ref.parameters()):
        full = p.full_tensor() if hasattr(p, "full_tensor") else p
        diff = (full.detach().double() - rp.detach().double()).abs()
        max_err = max(max_err, float(diff.max()))
        max_rel = max(max_rel, float((diff / rp.detach().double().abs().clamp_min(1e-12)).max()))
    if rank == 0:
        tmp = out + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"max_abs_err": max_err, "max_rel_err": max_rel, "max_loss_err": max_loss_err}, f)
        os.replace(tmp, out)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(*sys.argv[1:5])
