"""The dataloader aspect: the workload's dataset through torch.utils.data.DataLoader's worker processes.

Every other check runs in one process; upgrades broke loading between processes: DataLoader workers that failed to
initialise CUDA (NVIDIA/recsys-examples#352 on 2.11, vllm-project/speculators#887 on 2.13), pin_memory crashing on
tensor subclasses (pytorch#163102). The parent first makes a tensor on the device (a training job has its model
there before it builds its loader; on CUDA a forked worker inherits that), then loads the workload's map-style
`dataset` (its first MAX_ITEMS items) in batches of BATCH, put together by its `collate` (default_collate without
one) and shuffled by a seeded torch.Generator:

- with num_workers=0, EPOCHS epochs: the reference; in compare the baseline saves its first epoch's batches and
  every epoch's order (mode "save"), and the candidate compares its own with them (mode "compare");
- with WORKERS workers under each start method the platform offers (fork, spawn, forkserver), persistent_workers
  off (one epoch) and on (EPOCHS: the later ones reuse the workers), pin_memory on where the device has it.

Each batch (read by content, whatever the collate returns: batchleaves) must be bitwise what num_workers=0 makes of
the same indices (a DataLoader in the parent over the batches of indices the loader's batch sampler handed out,
recorded as it handed them out), in the order they were handed out, and the first epoch's order must be the
reference's. Only the first: persistent workers keep the worker seed torch drew from the generator for their first
epoch, so later epochs' orders come from another point of the generator than num_workers=0's. Each loader is
bounded: DataLoader's own timeout for every batch (BATCH_TIMEOUT_S) and WALL_S for them all (those left are not run,
and say so). A worker that dies before its loop leaves DataLoader only its pid and exit code: what the workers wrote
to stderr meanwhile is read back for their own error.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import IO, Any

import torch
from torch.utils.data import BatchSampler, DataLoader, RandomSampler, Subset, default_collate

from torch_upgrade_check.aspects.dataloader import baseline
from torch_upgrade_check.aspects.dataloader import leaves as batchleaves
from torch_upgrade_check.aspects.dataloader.leaves import leaf_difference, leaves
from torch_upgrade_check.model import CheckSpec
from torch_upgrade_check.worker import first_line
from torch_upgrade_check.worker.devices import Device
from torch_upgrade_check.worker.instance import Instance, Skip

WORKERS = 2
BATCH = 8
MAX_ITEMS = 64
EPOCHS = 2
SEED = 0
BATCH_TIMEOUT_S = 60.0  # DataLoader's timeout: a spawned worker imports torch before its first batch
WALL_S = 200.0  # every loader together, within the worker's per-check timeout (300 s by default)
# in this order; fork only where Python does not call it unsafe (macOS: it can crash the child, spawn is the default)
START_METHODS = ("fork", "spawn", "forkserver")


def start_methods() -> list[str]:
    offered = multiprocessing.get_all_start_methods()
    return [m for m in START_METHODS if m in offered and not (m == "fork" and sys.platform == "darwin")]


@dataclass(frozen=True)
class Loader:
    """One DataLoader configuration of the matrix."""

    workers: int
    method: str = ""
    persistent: bool = False
    pin: bool = False
    epochs: int = 1

    def describe(self) -> dict[str, Any]:
        return {"start_method": self.method, "persistent_workers": self.persistent, "pin_memory": self.pin,
                "num_workers": self.workers, "epochs": self.epochs}


def run(spec: CheckSpec, factory: Callable[..., Any], inst: Instance, device: Device) -> dict[str, Any]:
    dataset = _dataset(inst)
    collate = inst.collate or default_collate
    torch.zeros(1, device=device.name).add_(1)  # the parent initialised the device before building its loaders
    device.synchronize()
    pin = device.pin_memory()
    timeout = BATCH_TIMEOUT_S
    expected = Expected(dataset, collate)
    reference = _load(dataset, collate, Loader(0, epochs=EPOCHS), expected, timeout)  # raises: the dataset's own error
    deadline = time.monotonic() + WALL_S
    runs = []
    for method in start_methods():
        for persistent in (False, True):
            loader = Loader(WORKERS, method, persistent, pin.ok, EPOCHS if persistent else 1)
            if time.monotonic() > deadline:
                runs.append({**loader.describe(), "outcome": "not run",
                             "error": f"the loaders before it spent the check's bound of {WALL_S:g} s"})
                continue
            runs.append(_checked(dataset, collate, loader, expected, timeout, reference["orders"]))
    metrics: dict[str, Any] = {
        "items": len(dataset), "dataset_items": len(inst.dataset), "batch_size": BATCH, "workers": WORKERS,
        "reference_epochs": EPOCHS,
        "reference_batches": sum(len(o) for o in reference["orders"]), "parent_initialised": device.name,
        "pin_memory": pin.ok, **({} if pin.ok else {"pin_memory_off": pin.reason}),
        "start_methods": start_methods(), "batch_timeout_s": timeout, "wall_s": WALL_S,
        "collate": "default_collate" if inst.collate is None else getattr(inst.collate, "__qualname__", repr(inst.collate)),
        "dataset": type(inst.dataset).__qualname__,
        "runs": runs, "mode": spec.params.get("mode") or "alone", **_unread(reference),
        "cross_version_rule": "bitwise" if not spec.factory else "bitwise, or floating tensors within rtol/atol",
    }
    if spec.params.get("mode") == "save":
        baseline.save(spec, reference)
    elif spec.params.get("mode") == "compare":
        metrics.update(baseline.against(spec, inst, reference))
    return metrics


def _unread(reference: dict[str, Any]) -> dict[str, Any]:
    """The batch leaves num_workers=0 gave that could not be read (compared by type only), with why: a few, how many,
    and how many leaves of a batch were read (at most)."""
    unread = reference.get("unread") or {}
    if not unread:
        return {}
    return {"unread_leaves": dict(list(unread.items())[:3]), "unread_count": len(unread),
            "read_leaves": reference.get("read_leaves", 0)}


def _read_count(got: Mapping[str, Any]) -> int:
    """How many leaves of a batch hold content that was read (not a type's name, not an object left unread)."""
    return sum(1 for k, v in got.items() if not k.endswith("__class__") and not (
        isinstance(v, str) and v.startswith(batchleaves.UNREAD)))


def _dataset(inst: Instance) -> Any:
    """The workload's map-style dataset, cut to its first MAX_ITEMS items, or Skip saying why there is none."""
    dataset = inst.dataset
    if dataset is None:
        raise Skip("the workload's factory returns no 'dataset': return your training Dataset (map-style) and its "
                   "'collate' (collate_fn) to check them through DataLoader worker processes")
    if isinstance(dataset, torch.utils.data.IterableDataset) or not all(
            hasattr(dataset, name) for name in ("__getitem__", "__len__")):
        raise Skip(f"the factory's dataset ({type(dataset).__name__}) is not map-style: the dataloader check loads "
                   f"a Dataset with __getitem__ and __len__")
    return dataset if len(dataset) <= MAX_ITEMS else Subset(dataset, range(MAX_ITEMS))


class _Recorded:
    """A batch sampler that keeps each epoch's batches of indices, in the order it hands them out (what the loader
    must return them in)."""

    def __init__(self, inner: Iterable[list[int]]) -> None:
        self.inner = inner
        self.epochs: list[list[list[int]]] = []

    def __len__(self) -> int:
        return len(self.inner)  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[list[int]]:
        order: list[list[int]] = []
        self.epochs.append(order)
        for batch in self.inner:
            order.append([int(i) for i in batch])
            yield batch


class Expected:
    """What num_workers=0 makes of a batch of indices: a DataLoader in this process over it, kept per batch."""

    def __init__(self, dataset: Any, collate: Callable[[list[Any]], Any]) -> None:
        self.dataset, self.collate = dataset, collate
        self.made: dict[tuple[int, ...], dict[str, Any]] = {}

    def __call__(self, indices: list[int]) -> dict[str, Any]:
        key = tuple(indices)
        if key not in self.made:
            (batch,) = list(DataLoader(self.dataset, batch_sampler=[indices], num_workers=0, collate_fn=self.collate))
            self.made[key] = leaves(batch)
        return self.made[key]


def _load(dataset: Any, collate: Callable[[list[Any]], Any], loader: Loader, expected: Expected,
          timeout: float) -> dict[str, Any]:
    """The loader's epochs: each batch compared, as it arrives, with num_workers=0's of the indices handed out for it
    (the loader's batches are not kept: a team's items may be large). Raises what the loader raised."""
    generator = torch.Generator().manual_seed(SEED)
    sampler = _Recorded(BatchSampler(RandomSampler(dataset, generator=generator), BATCH, drop_last=False))
    options: dict[str, Any] = {"num_workers": loader.workers, "collate_fn": collate, "generator": generator,
                               "pin_memory": loader.pin}
    if loader.workers:
        options.update(multiprocessing_context=loader.method, persistent_workers=loader.persistent, timeout=timeout)
    data = DataLoader(dataset, batch_sampler=sampler, **options)
    iterators: list[Any] = []
    try:
        with warnings.catch_warnings():
            # Python 3.12+ warns at every fork of a process with threads (this worker has a watchdog thread): a
            # warning about this process, the same with any torch, not one of the torch under test
            warnings.filterwarnings("ignore", message=r".*use of fork\(\) may lead to deadlocks",
                                    category=DeprecationWarning)
            found, batches = _epochs(data, sampler, loader, expected, iterators)
    finally:
        shut_down = getattr(iterators[-1] if iterators else None, "_shutdown_workers", None)
        if loader.workers and shut_down is not None:
            shut_down()  # persistent workers too: nothing is left running after the check
    return {**found, "orders": sampler.epochs, "first_epoch": batches}


def _epochs(data: DataLoader, sampler: _Recorded, loader: Loader, expected: Expected,
            iterators: list[Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """`loader.epochs` epochs of `data`, each batch compared as it arrives (the last iterator kept in `iterators`, for
    its workers to be shut down); the first difference, and num_workers=0's first epoch's batches."""
    found: dict[str, Any] = {"batches": 0}
    batches: list[dict[str, Any]] = []  # num_workers=0's first epoch: what the baseline saves
    for epoch in range(loader.epochs):
        iterators[:] = [iter(data)]
        returned = 0
        for batch in iterators[0]:
            r, handed = batchleaves.read(batch), sampler.epochs[-1]
            got = r.leaves
            if loader.pin:
                _judge_pins(found, r)
            if not loader.workers:  # the reference itself: num_workers=0 over these indices
                found.setdefault("unread", {}).update(r.unread)  # what this check could not compare
                found["read_leaves"] = max(found.get("read_leaves", 0), _read_count(got))
                expected.made.setdefault(tuple(handed[returned]), got)
                batches += [got] if epoch == 0 else []
            elif returned >= len(handed) and "first_difference" not in found:
                found["first_difference"] = {"epoch": epoch + 1, "batch": returned, "key": "",
                                             "how": f"more batches than the {len(handed)} the sampler handed out"}
            elif "first_difference" not in found:
                diff = _difference(got, expected(handed[returned]))
                if diff:
                    found["first_difference"] = {"epoch": epoch + 1, "batch": returned, "key": diff[0],
                                                 "how": diff[1], "indices": handed[returned][:BATCH],
                                                 **_reordered(got, handed, returned, expected)}
            returned += 1
        found["batches"] += returned
        if returned != len(sampler.epochs[-1]) and "first_difference" not in found:
            found["first_difference"] = {"epoch": epoch + 1, "batch": returned, "key": "",
                                         "how": f"the epoch ended after {returned} batches; the sampler handed "
                                                f"out {len(sampler.epochs[-1])}"}
    return found, batches


def _checked(dataset: Any, collate: Callable[[list[Any]], Any], loader: Loader, expected: Expected, timeout: float,
             reference_orders: list[list[list[int]]]) -> dict[str, Any]:
    """One configuration's outcome: equal, differs (the first difference), or the loader's error with the workers'."""
    start = time.monotonic()
    result: dict[str, Any] = loader.describe()
    with _StderrTail() as tail:
        try:
            found = _load(dataset, collate, loader, expected, timeout)
        except Exception as e:
            found = _failure(e)
    result["seconds"] = round(time.monotonic() - start, 3)
    if "error" in found:
        worker = _worker_error(tail.text)
        return {**result, **found, **({"worker_error": worker} if worker else {})}
    result.update(batches=found["batches"], **{k: found[k] for k in ("pinned", "unpinned", "pin_not_reached")
                                                if k in found})
    if found.get("first_difference"):
        return {**result, "outcome": "differs", "first_difference": found["first_difference"]}
    first, ref = found["orders"][0], reference_orders[0]
    if first != ref:
        k = next((i for i, (a, b) in enumerate(zip(first, ref)) if a != b), min(len(first), len(ref)))
        return {**result, "outcome": "differs", "first_difference": {
            "epoch": 1, "batch": k, "key": "", "how": f"the sampler handed out indices {baseline.at(first, k)} where "
                                                      f"num_workers=0's handed out {baseline.at(ref, k)}"}}
    return {**result, "outcome": "equal"}


def _reordered(got: dict[str, Any], handed: list[list[int]], at: int, expected: Expected) -> dict[str, Any]:
    """Where a differing batch is another batch of the epoch, returned out of turn: which one."""
    for j, indices in enumerate(handed):
        if j != at and _difference(got, expected(indices)) is None:
            return {"is_batch": j}
    return {}


def _difference(got: Mapping[str, Any], want: Mapping[str, Any]) -> tuple[str, str] | None:
    """The first key whose leaf is not bitwise num_workers=0's, and how; None when every leaf is."""
    for key in [*want, *(k for k in got if k not in want)]:
        if key not in got:
            return key, "missing from the batch"
        if key not in want:
            return key, "not in num_workers=0's batch"
        how = leaf_difference(got[key], want[key])
        if how:
            return key, how
    return None


def _judge_pins(found: dict[str, Any], r: batchleaves.Read) -> None:
    """Whether every tensor DataLoader's pin_memory reaches came back pinned (False from the first that did not,
    named; None while no batch held one); the tensors it leaves as they are (inside types without a pin_memory
    method) are named (the first three), not judged."""
    for key, t in r.pinnable:
        if found.get("pinned") is False:
            break
        found["pinned"] = bool(t.is_pinned())
        if not found["pinned"]:
            found["unpinned"] = key
    found.setdefault("pinned", None)
    if r.not_reached:
        seen = found.setdefault("pin_not_reached", [])
        seen += [k for k in r.not_reached if k not in seen][:max(0, 3 - len(seen))]


def _error_line(e: BaseException) -> str:
    """The loader's error: its first line and, where DataLoader re-raised a worker's exception ("Caught X in
    DataLoader worker process 0. Original Traceback …"), the worker's own last line; and the error it was raised
    from, where that says more ("exited unexpectedly" from the signal handler's "is killed by signal: Killed.")."""
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    text = f"{type(e).__name__}: {first_line(e)}"
    if len(lines) > 1 and lines[-1] != lines[0]:
        text += f" … {lines[-1]}"
    cause = e.__cause__
    if cause is not None and first_line(cause) and first_line(cause) not in text:
        text += f" (from {type(cause).__name__}: {first_line(cause)})"
    return text[:400]


def _failure(e: BaseException) -> dict[str, str]:
    """The loader's error and its kind. A worker's death is told by DataLoader's SIGCHLD handler, which raises in this
    process wherever it happens to be: inside Thread.start of a queue's feeder thread, threading's own clean-up then
    raises a KeyError naming the thread, its context the worker's death (about 1 in 30 fork loaders whose workers die
    at once). The error in the chain that says a worker died is the one reported, with what surfaced it."""
    died = next((x for x in _chain(e) if _failure_kind(str(x)) == "died"), None)
    if died is None or died is e:
        return {"error": _error_line(e), "outcome": _failure_kind(str(e))}
    surfaced = f"{type(e).__name__}: {first_line(e)}"[:120]
    return {"error": f"{_error_line(died)} (surfaced as {surfaced})"[:400], "outcome": "died"}


def _chain(e: BaseException) -> list[BaseException]:
    """`e` and the errors it was raised from or while handling, nearest first (each once)."""
    seen: list[BaseException] = []
    at: BaseException | None = e
    while at is not None and all(at is not x for x in seen):
        seen.append(at)
        at = at.__cause__ or at.__context__
    return seen


def _failure_kind(message: str) -> str:
    """timed out (no batch within the timeout: a hung worker), died (a worker exited or was killed), or raised."""
    if "timed out after" in message:
        return "timed out"
    if "exited unexpectedly" in message or "killed by signal" in message:
        return "died"
    return "raised"


_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Warning)|KeyboardInterrupt)\b.*")


def _worker_error(text: str) -> str:
    """The last exception a worker process printed (multiprocessing prints a failed process's traceback)."""
    found = [line.strip() for line in text.splitlines() if _EXCEPTION.match(line.strip())]
    return found[-1][:300] if found else ""


class _StderrTail:
    """File descriptor 2 redirected into a file of this process while a loader runs, so that what its worker
    processes print reaches it (they inherit the descriptor: fork and spawn children, and the forkserver, which
    forkserver workers inherit theirs from, when it starts meanwhile); written back to the real stderr after."""

    _file: IO[bytes] | None = None  # one for the process: a forkserver started in it keeps writing there

    def __enter__(self) -> _StderrTail:
        if _StderrTail._file is None:
            _StderrTail._file = tempfile.TemporaryFile(prefix="tuc-dataloader-stderr-")
        sys.stderr.flush()
        self.text = ""
        self.start = _StderrTail._file.seek(0, os.SEEK_END)
        self.saved = os.dup(2)
        os.dup2(_StderrTail._file.fileno(), 2)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.stderr.flush()
        os.dup2(self.saved, 2)
        os.close(self.saved)
        f = _StderrTail._file
        assert f is not None
        f.seek(self.start)
        data = f.read()
        f.seek(0, os.SEEK_END)
        if data:
            os.write(2, data)
        self.text = data.decode(errors="replace")[-20000:]
