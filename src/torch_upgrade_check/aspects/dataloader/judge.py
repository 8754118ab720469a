"""The dataloader aspect's typed metrics and rule (pure): every DataLoader with workers gave num_workers=0's batches,
bitwise and in order; in compare, num_workers=0's order and batches are also the baseline's.

A loader (a start method, persistent_workers off or on, pin_memory where the device has it) fails when it raised
(its error, and the worker's own where the worker printed one), timed out (no batch within DataLoader's timeout: a
worker hung), lost a worker (it died: DataLoader's own error, with the pid and exit code or signal, and the worker's
error), gave a batch that is not bitwise num_workers=0's of the same indices (the first one: its epoch, batch and key,
and what differs; a batch of the epoch returned out of turn says which one it is), handed out another order than
num_workers=0's in the first epoch, or returned a tensor DataLoader's pin_memory reaches outside pinned memory with
pin_memory on (0-element tensors have no memory to pin and are not judged; tensors inside types DataLoader leaves as
they are, without a pin_memory method, are named as not judged). One the wall bound left unrun fails too. The reason
names the first failing loader and counts the others. Batch leaves the worker could not read (compared by type only)
are named beside a pass; a batch with nothing read at all is skipped, never passed.

compare (the candidate): num_workers=0's order in every epoch (the same generator seed) and its first epoch's
batches must be the baseline's: bitwise for the built-in dataset (exact integer arithmetic in every release); for a
team's dataset a floating tensor may instead be within the workload's rtol/atol (items computed by torch ops whose
rounding a release may change), and the reason says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from torch_upgrade_check.analysis.closeness import short
from torch_upgrade_check.aspects._metrics import Judged, Recorded
from torch_upgrade_check.model import CheckSpec, Outcome


@dataclass(frozen=True)
class Loader(Recorded):
    """One DataLoader with workers, as the worker ran it (`runs` of the metrics)."""

    start_method: str | None = None
    persistent_workers: bool | None = None
    pin_memory: bool | None = None
    outcome: str | None = None  # equal, differs, timed out, died, raised, not run
    error: str | None = None
    worker_error: str | None = None
    first_difference: Mapping[str, Any] | None = None
    pinned: bool | None = None  # None: no tensor pin_memory pins; False: one came back unpinned (`unpinned` names it)
    unpinned: str | None = None
    pin_not_reached: Sequence[str] | None = None
    epochs: int | None = None
    batches: int | None = None


@dataclass(frozen=True)
class Metrics(Recorded):
    """The dataloader check's metrics (worker: aspects.dataloader.run)."""

    NESTED: ClassVar[Mapping[str, type[Recorded]]] = {"runs": Loader}
    runs: Sequence[Loader] | None = None
    mode: str | None = None  # "compare": the candidate, against the baseline's saved batches
    workers: int | None = None
    batch_size: int | None = None
    items: int | None = None
    parent_initialised: str | None = None
    batch_timeout_s: float | None = None
    wall_s: float | None = None
    pin_memory: bool | None = None
    pin_memory_off: str | None = None
    unread_leaves: Mapping[str, str] | None = None
    unread_count: int | None = None
    read_leaves: int | None = None
    baseline_torch: str | None = None
    cross_version_rule: str | None = None
    vs_baseline: str | None = None  # equal, within tolerance, order, batch, none
    first_difference_vs_baseline: Mapping[str, Any] | None = None
    reference_epochs: int | None = None
    rounded_leaves: int | None = None
    rtol: float | None = None
    atol: float | None = None
    max_abs_diff_vs_baseline: float | None = None


def judge(m: Metrics, spec: CheckSpec | None = None) -> Judged:
    """The rule above; `spec` is not read (the dataloader's rule is the same for every dtype)."""
    runs: Sequence[Loader] = m.runs or ()
    thresholds = {"bitwise": True, "batch_timeout_s": m.batch_timeout_s, "wall_s": m.wall_s,
                  **({"cross_version_rule": m.cross_version_rule} if m.mode == "compare" else {})}
    if not runs:
        return Judged(Outcome.FAILED, "no DataLoader with workers ran", thresholds)
    bad = [r for r in runs if problem(r)]
    baseline = _baseline(m)
    if bad:
        others = (f"; {len(bad) - 1} more of the {len(runs)} loaders failed ({', '.join(setup(r) for r in bad[1:4])}"
                  f"{', …' if len(bad) > 4 else ''})" if len(bad) > 1 else
                  f"; the other {len(runs) - 1} loaders gave num_workers=0's batches")
        vs = f"; {baseline[1]}" if baseline and not baseline[0] else ""
        return Judged(Outcome.FAILED, f"{setup(bad[0])}: {problem(bad[0])}{others}{vs}", thresholds)
    if baseline and not baseline[0]:
        return Judged(Outcome.FAILED, f"{baseline[1]}; {_passed(m, runs)}", thresholds)
    unread = _unread(m)
    if unread and not m.read_leaves:
        return Judged(Outcome.SKIPPED, f"nothing in the batches could be compared: {unread}", thresholds)
    return Judged(Outcome.PASSED, _passed(m, runs) + (f"; {baseline[1]}" if baseline else "") + (
        f"; {unread}" if unread else ""), thresholds)


def setup(r: Loader) -> str:
    """`spawn, persistent_workers=True, pin_memory on`: which loader."""
    pin = ", pin_memory on" if r.pin_memory else ""
    return f"{r.start_method}, persistent_workers={bool(r.persistent_workers)}{pin}"


def problem(r: Loader) -> str:
    """What went wrong with one loader, in a line; '' when it gave num_workers=0's batches."""
    outcome = r.outcome
    worker = r.worker_error or ""
    theirs = f"; the worker's error: {worker}" if worker and worker not in str(r.error) else ""
    if outcome == "equal":
        if r.pinned is not False:
            return ""
        first = f" ({r.unpinned}, the first)" if r.unpinned else ""
        return f"with pin_memory=True the batches came back outside pinned memory{first}"
    if outcome == "differs":
        return _difference(r.first_difference or {})
    if outcome == "timed out":
        return f"no batch within DataLoader's timeout (a worker hung): {r.error}{theirs}"
    if outcome == "died":
        return f"a worker died: {r.error}{theirs}"
    if outcome == "raised":
        return f"the loader raised {r.error}{theirs}"
    if outcome == "not run":
        return f"not run: {r.error}"
    return f"no outcome recorded ({outcome!r})"


def _difference(d: Mapping[str, Any]) -> str:
    where = f"epoch {d.get('epoch')}, batch {int(d.get('batch') or 0) + 1}"
    if "is_batch" in d:
        return (f"{where} came back out of order: it is num_workers=0's batch of the indices the sampler handed out "
                f"for batch {int(d['is_batch']) + 1}")
    if d.get("key"):
        return (f"{where} is not bitwise num_workers=0's batch of the same indices {d.get('indices')}: "
                f"{d.get('key')}: {d.get('how')}")
    return f"{where}: {d.get('how')}"


def _unread(m: Metrics) -> str:
    """The batch leaves that could not be read, said so ('' when every one was)."""
    unread: Mapping[str, str] = m.unread_leaves or {}
    if not unread:
        return ""
    named = "; ".join(f"{k}: {why}" for k, why in unread.items())
    more = f" and {int(m.unread_count or 0) - len(unread)} more" if int(m.unread_count or 0) > len(unread) else ""
    return f"{m.unread_count} batch leaves could not be read, only their types compared ({named}{more})"


def _pinning(m: Metrics, runs: Sequence[Loader]) -> str:
    """What pin_memory's loaders showed: batches pinned, nothing to judge, and the tensors DataLoader leaves alone."""
    if not m.pin_memory:
        return f"pin_memory off ({m.pin_memory_off or 'not on this device'})"
    pinned = [r for r in runs if r.pin_memory]
    said = ("pin_memory on, batches pinned" if pinned and all(r.pinned for r in pinned) else
            "pin_memory on, but no batch held a tensor DataLoader pins: pinning not judged")
    alone = list(dict.fromkeys(k for r in pinned for k in r.pin_not_reached or []))[:3]
    if alone:
        said += (f" (tensors inside types without a pin_memory method, which DataLoader leaves as they are, not "
                 f"judged: {', '.join(alone)})")
    return said


def _passed(m: Metrics, runs: Sequence[Loader]) -> str:
    methods = ", ".join(dict.fromkeys(str(r.start_method) for r in runs))
    epochs = sorted({int(r.epochs or 0) for r in runs if r.persistent_workers})
    pinned = _pinning(m, runs)
    return (f"{len(runs)} loaders with {m.workers} workers ({methods}; persistent_workers off: 1 epoch, on: "
            f"{'/'.join(map(str, epochs)) or '?'}) gave num_workers=0's batches bitwise and in order "
            f"({sum(int(r.batches or 0) for r in runs)} batches of {m.batch_size} of {m.items} "
            f"items, after the parent initialised {m.parent_initialised}); {pinned}")


def _baseline(m: Metrics) -> tuple[bool, str] | None:
    """In compare: whether num_workers=0's orders and batches are the baseline's, and the line that says so."""
    if m.mode != "compare":
        return None
    whose, vs = f"baseline {m.baseline_torch}", m.vs_baseline
    d = m.first_difference_vs_baseline or {}
    if vs == "none":
        return True, "the baseline saved no batches (its check did not run, or failed there): not compared with it"
    if vs == "equal":
        return True, f"num_workers=0's {m.reference_epochs} epochs are {whose}'s: the same order, batches bitwise"
    if vs == "within tolerance":
        return True, (f"num_workers=0's order is {whose}'s; {m.rounded_leaves} floating tensors of its batches "
                      f"are not bitwise {whose}'s but within rtol {m.rtol:g}, atol {m.atol:g} (max abs "
                      f"diff {short(m.max_abs_diff_vs_baseline)}): the dataset's torch ops round differently")
    if vs == "order":
        return False, (f"the seeded shuffle changed since {whose}: epoch {d.get('epoch')}, batch "
                       f"{int(d.get('batch') or 0) + 1} holds indices {d.get('indices')} here and "
                       f"{d.get('baseline_indices')} on the baseline (the same generator seed, num_workers=0)")
    if vs == "batch":
        return False, (f"num_workers=0's batch {int(d.get('batch') or 0) + 1} of epoch 1 is not {whose}'s: "
                       f"{d.get('key')}: {d.get('how')}")
    return False, f"no comparison with {whose}'s batches was recorded"
