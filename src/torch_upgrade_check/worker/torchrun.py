"""Training checks under torchrun: `python -m torch.distributed.run --standalone` starts the ranks, each runs a
trainer's steps (aspects/ddp/run.py: DistributedDataParallel; aspects/fsdp2/run.py: fully_shard), judged against the unsharded
single-process model, then every rank must exit 0 and the process group must shut down: `destroy_process_group`
returns on every rank within SHUTDOWN_TIMEOUT_S of the last rank reaching it, and no rank is left running (a rank
still running then is named and killed).

Each rank writes `rank<N>.json` (its pid, its stage, its peak host memory) before and after shutting down; rank 0
also writes the trainer's comparison. gloo on CPU; NCCL on 2+ GPUs (device.process_group decides, or says why not).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from torch_upgrade_check.aspects import part
from torch_upgrade_check.model import CheckSpec
from torch_upgrade_check.worker import devices, steps
from torch_upgrade_check.worker.instance import Skip

TRAIN_TIMEOUT_S = 180  # torchrun's start, both ranks' torch imports and the steps
SHUTDOWN_TIMEOUT_S = 20  # from the last rank reaching destroy_process_group to torchrun's exit


def run(spec: CheckSpec, device: devices.Device, trainer: str, label: str) -> dict[str, Any]:
    """`trainer`'s training steps (the aspect whose run.py has `train`) on the ranks torchrun starts, its result with each rank's
    exit, shutdown and peak host memory; `label` names it in errors and skips ("DDP", "FSDP2")."""
    group = device.process_group(label)
    if not group.ok:
        raise Skip(group.reason)
    backend, world = group.backend, group.world
    from torch_upgrade_check.worker import crossversion  # not in the ranks: each imports this module

    mode = spec.params.get("mode") or "alone"
    store = crossversion.store_path(spec).with_suffix(f".{trainer}.pt") if mode != "alone" else None
    start, missing = _baseline_steps(store, world) if mode == "compare" else (None, "")
    with tempfile.TemporaryDirectory(prefix=f"tuc-{trainer}-") as tmp:
        folder, log = Path(tmp), Path(tmp) / "torchrun.log"
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={world}",
               "-m", "torch_upgrade_check.worker.torchrun", trainer, backend, spec.device, spec.dtype, tmp,
               str(start or "-"), "record" if store else "-"]
        with log.open("w") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        code, hung, waited = _wait(proc, folder, world)
        ranks = [_rank(folder, r) for r in range(world)]
        left = _kill_all(proc, ranks)  # torchrun and any rank still running, by the pids the ranks wrote
        result_file = folder / "result.json"
        if not all(r.get("stage") in ("shutting-down", "shut-down") for r in ranks) or not result_file.exists():
            stages = {r: ranks[r].get("stage", "never started") for r in range(world)}
            raise RuntimeError(f"{label} ranks did not finish their training steps (torchrun exit {code}, stages {stages}"
                               f"{f', killed after {waited:.0f}s' if code is None else ''})\n{_tail(log, 40)}")
        result = {**json.loads(result_file.read_text()), "mode": mode,
                  **_kept_or_judged(mode, folder / "steps.pt", store, start, missing, spec.dtype)}
        tail = _tail(log, 20) if code != 0 else ""
    return {**result, "world_size": world, "backend": backend, "launcher": "torchrun --standalone",
            "torchrun_exit": code, "hung_ranks": hung, "left_running": left,
            "shutdown_timeout_s": SHUTDOWN_TIMEOUT_S,
            "shutdown_s": [r.get("shutdown_s") for r in ranks],
            "rank_pids": [r.get("pid") for r in ranks],
            "rank_peak_host_bytes": [r.get("peak_host_bytes") for r in ranks],
            **({"torchrun_tail": tail} if tail else {})}


def _kept_or_judged(mode: str, recorded: Path, store: Path | None, start: Path | None, missing: str,
                    dtype: str) -> dict[str, Any]:
    """compare's sides: the baseline keeps its recorded steps in the store, the candidate is judged against them."""
    if mode == "save" and store is not None:
        store.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(recorded, store)
        return {"saved": str(store)}
    if mode == "compare":
        if start is None:
            return {"baseline_missing": missing}
        return {"vs_baseline": steps.against_baseline(steps.load(recorded), steps.load(start), dtype)}
    return {}


def _baseline_steps(store: Path | None, world: int) -> tuple[Path | None, str]:
    """The baseline's saved steps, which this side starts from and is judged against; else None and why not."""
    if store is None or not store.exists():
        return None, "the baseline saved no steps (its check did not finish there: see the baseline's result)"
    ran = steps.load(store).get("world")
    if ran != world:
        return None, f"the baseline ran {ran} ranks, this side {world}: their steps are not the same computation"
    return store, ""


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


def _tail(path: Path, lines: int = 20) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def main(trainer: str, backend: str, device_name: str, dtype_name: str, folder: str, start: str = "-",
         record: str = "-") -> None:
    """One rank: the trainer's `train(dist, rank, world, device, dtype, start, record)` between the process group's
    start and its shutdown, each stage written to rank<N>.json; rank 0 writes the trainer's result (and with
    `record`, its steps.pt: worker/steps.py). `start`: the baseline's steps.pt, or "-"."""
    import torch
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    me = Path(folder) / f"rank{rank}.json"
    _write(me, {"pid": os.getpid(), "stage": "started"})
    device = devices.get(device_name).rank_device(rank)
    dist.init_process_group(backend)  # env:// from torchrun
    baseline = steps.load(Path(start)) if start != "-" else None
    trainer_run = part(trainer, "run")  # the aspect's run.py: its `train`
    assert trainer_run is not None, f"{trainer} has no folder under aspects/"
    result, kept = trainer_run.train(dist, rank, world, device, devices.DTYPES[dtype_name], baseline,
                                     record == "record")
    if rank == 0:
        if kept:
            torch.save(kept, Path(folder) / "steps.tmp")
            os.replace(Path(folder) / "steps.tmp", Path(folder) / "steps.pt")
        _write(Path(folder) / "result.json", result)
    dist.barrier()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    _write(me, {"pid": os.getpid(), "stage": "shutting-down", "peak_host_bytes": peak})
    began = time.monotonic()
    dist.destroy_process_group()
    _write(me, {"pid": os.getpid(), "stage": "shut-down", "peak_host_bytes": peak,
                "shutdown_s": round(time.monotonic() - began, 3)})


if __name__ == "__main__":
    main(*sys.argv[1:8])
