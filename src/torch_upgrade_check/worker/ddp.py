"""DDP check under torchrun: `DistributedDataParallel` training steps on 2 ranks launched by
`python -m torch.distributed.run --standalone` must match the unsharded single-process model (fsdp2's rule:
each step's all-reduced gradients, each step's global loss, the parameters after the steps), every rank must
exit 0, and the process group must shut down: `destroy_process_group` returns on every rank within
SHUTDOWN_TIMEOUT_S and no rank is left running (a rank still running then is named and killed).

Each rank writes `rank<N>.json` (its pid, its stage, its peak host memory) before and after shutting down; rank 0
also writes the comparison. gloo on CPU; NCCL on 2+ GPUs (device.process_group decides, or says why not).
"""

from __future__ import annotations

import copy
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from torch_upgrade_check.model import CheckSpec
from torch_upgrade_check.worker import devices
from torch_upgrade_check.worker.fsdp2 import STEPS, _number, _parameters_error, _tail, _worse_loss, _worst_shard
from torch_upgrade_check.worker.instance import Skip

TRAIN_TIMEOUT_S = 180  # torchrun's start, both ranks' torch imports and the steps
SHUTDOWN_TIMEOUT_S = 20  # from the last rank reaching destroy_process_group to torchrun's exit


def run(spec: CheckSpec, device: devices.Device) -> dict[str, Any]:
    group = device.process_group("DDP")
    if not group.ok:
        raise Skip(group.reason)
    backend, world = group.backend, group.world
    with tempfile.TemporaryDirectory(prefix="tuc-ddp-") as tmp:
        folder, log = Path(tmp), Path(tmp) / "torchrun.log"
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={world}",
               "-m", "torch_upgrade_check.worker.ddp", backend, spec.device, spec.dtype, tmp]
        with log.open("w") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        code, hung, waited = _wait(proc, folder, world)
        ranks = [_rank(folder, r) for r in range(world)]
        left = _kill_all(proc, ranks)  # torchrun and any rank still running, by the pids the ranks wrote
        result_file = folder / "result.json"
        if not all(r.get("stage") in ("shutting-down", "shut-down") for r in ranks) or not result_file.exists():
            stages = {r: ranks[r].get("stage", "never started") for r in range(world)}
            raise RuntimeError(f"DDP ranks did not finish their training steps (torchrun exit {code}, stages {stages}"
                               f"{f', killed after {waited:.0f}s' if code is None else ''})\n{_tail(log, 40)}")
        result = json.loads(result_file.read_text())
        tail = _tail(log, 20) if code != 0 else ""
    return {**result, "world_size": world, "backend": backend, "steps": STEPS, "launcher": "torchrun --standalone",
            "torchrun_exit": code, "hung_ranks": hung, "left_running": left,
            "shutdown_timeout_s": SHUTDOWN_TIMEOUT_S,
            "shutdown_s": [r.get("shutdown_s") for r in ranks],
            "rank_pids": [r.get("pid") for r in ranks],
            "rank_peak_host_bytes": [r.get("peak_host_bytes") for r in ranks],
            **({"torchrun_tail": tail} if tail else {})}


def _wait(proc: subprocess.Popen[bytes], folder: Path, world: int) -> tuple[int | None, list[int], float]:
    """torchrun's exit code (None: it was still running), the ranks that had not shut down, seconds waited.
    The shutdown clock starts when the last rank reaches destroy_process_group."""
    start = time.monotonic()
    deadline = start + TRAIN_TIMEOUT_S
    shutdown_from = None
    while proc.poll() is None and time.monotonic() < deadline:
        if shutdown_from is None and all(_rank(folder, r).get("stage") in ("shutting-down", "shut-down")
                                         for r in range(world)):
            shutdown_from = time.monotonic()
            deadline = min(deadline, shutdown_from + SHUTDOWN_TIMEOUT_S)
        time.sleep(0.1)
    code = proc.poll()
    hung = [r for r in range(world) if _rank(folder, r).get("stage") != "shut-down"] if code is None else []
    return code, hung, time.monotonic() - start


def _rank(folder: Path, rank: int) -> dict[str, Any]:
    try:
        return json.loads((folder / f"rank{rank}.json").read_text())
    except (OSError, ValueError):
        return {}


def _kill_all(proc: subprocess.Popen[bytes], ranks: list[dict[str, Any]]) -> list[int]:
    """Kill torchrun's session and every rank's (torchrun starts each rank in a session of its own); the pids that
    were still running, as found before the kill."""
    pids = [r["pid"] for r in ranks if r.get("pid")]
    left = [pid for pid in pids if _alive(pid)]
    for pgid in (proc.pid, *left):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    proc.wait()
    for pid in left:
        for _ in range(50):  # reaped by torchrun's death (init adopts them): wait until the kernel has let them go
            if not _alive(pid):
                break
            time.sleep(0.1)
    return left


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True


def _write(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def main(backend: str, device_name: str, dtype_name: str, folder: str) -> None:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    from torch_upgrade_check.worker.workloads import transformer_block

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    me = Path(folder) / f"rank{rank}.json"
    _write(me, {"pid": os.getpid(), "stage": "started"})
    device = devices.get(device_name).rank_device(rank)
    dist.init_process_group(backend)  # env:// from torchrun
    dtype = devices.DTYPES[dtype_name]
    torch.manual_seed(0)
    ref = transformer_block(device, dtype)["model"]
    model = DistributedDataParallel(copy.deepcopy(ref), device_ids=[rank] if backend == "nccl" else None)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.05)
    loss_err = {"abs": 0.0, "rel": 0.0, "step": 0}
    worst = {"grad_err": 0.0, "grad_index": -1, "grad_step": 0, "grad_shards": 0, "unmatched": 0, "unmatched_index": -1}
    for step in range(STEPS):
        gen = torch.Generator().manual_seed(1000 + step)
        batch = torch.randn(world * 2, 16, 64, generator=gen).to(device, dtype)
        project = torch.randn(batch.shape, generator=gen).to(device, dtype)  # as fsdp2's loss, and for its reason
        rows = slice(rank * 2, (rank + 1) * 2)
        loss = (model(batch[rows]).float() * project[rows].float()).mean()
        loss.backward()  # DDP all-reduces (averages) the gradients here
        ref_loss = (ref(batch).float() * project.float()).mean()
        ref_loss.backward()
        _worst_shard(model.module, ref, 0, 1, step, worst)  # DDP's gradient is whole: world 1 slices nothing
        opt.step()
        opt.zero_grad()
        ref_opt.step()
        ref_opt.zero_grad()
        global_loss = loss.detach().clone()
        dist.all_reduce(global_loss)
        _worse_loss(loss_err, float(global_loss) / world, float(ref_loss), step)
    mine = torch.tensor([worst["grad_err"], worst["grad_index"], worst["grad_step"], worst["grad_shards"]],
                        dtype=torch.float64, device=device)
    every_rank = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(every_rank, mine)
    max_err, max_rel = _parameters_error(model.module, ref)
    if rank == 0:
        found = [t.tolist() for t in every_rank]
        top = max(range(world), key=lambda r: found[r][0])
        names = [n for n, _ in model.module.named_parameters()]
        _write(Path(folder) / "result.json", {
            "max_abs_err": _number(max_err), "max_rel_err": _number(max_rel),
            "max_loss_err": _number(loss_err["abs"]), "max_loss_rel_err": _number(loss_err["rel"]),
            "worst_loss_step": loss_err["step"], "max_grad_err": _number(found[top][0]),
            "worst_grad": names[int(found[top][1])] if found[top][1] >= 0 else "",
            "worst_grad_step": int(found[top][2]), "worst_grad_rank": top,
            "grad_shards_compared": int(sum(row[3] for row in found)), "grad_shards_unmatched": 0,
            "unmatched_grad": ""})
    dist.barrier()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    _write(me, {"pid": os.getpid(), "stage": "shutting-down", "peak_host_bytes": peak})
    began = time.monotonic()
    dist.destroy_process_group()
    _write(me, {"pid": os.getpid(), "stage": "shut-down", "peak_host_bytes": peak,
                "shutdown_s": round(time.monotonic() - began, 3)})


if __name__ == "__main__":
    main(*sys.argv[1:5])
