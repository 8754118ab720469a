"""The dataloader aspect's rule (pure): every DataLoader with workers gave num_workers=0's batches, bitwise and in
order; in compare, num_workers=0's order and batches are also the baseline's.

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
from typing import Any

from torch_upgrade_check.analysis.closeness import short
from torch_upgrade_check.model import Outcome


def judge(m: Mapping[str, Any]) -> tuple[Outcome, str, dict[str, Any]]:
    runs: Sequence[Mapping[str, Any]] = m.get("runs") or []
    thresholds = {"bitwise": True, "batch_timeout_s": m.get("batch_timeout_s"), "wall_s": m.get("wall_s"),
                  **({"cross_version_rule": m.get("cross_version_rule")} if m.get("mode") == "compare" else {})}
    if not runs:
        return Outcome.FAILED, "no DataLoader with workers ran", thresholds
    bad = [r for r in runs if problem(r)]
    baseline = _baseline(m)
    if bad:
        others = (f"; {len(bad) - 1} more of the {len(runs)} loaders failed ({', '.join(setup(r) for r in bad[1:4])}"
                  f"{', …' if len(bad) > 4 else ''})" if len(bad) > 1 else
                  f"; the other {len(runs) - 1} loaders gave num_workers=0's batches")
        vs = f"; {baseline[1]}" if baseline and not baseline[0] else ""
        return Outcome.FAILED, f"{setup(bad[0])}: {problem(bad[0])}{others}{vs}", thresholds
    if baseline and not baseline[0]:
        return Outcome.FAILED, f"{baseline[1]}; {_passed(m, runs)}", thresholds
    unread = _unread(m)
    if unread and not m.get("read_leaves"):
        return Outcome.SKIPPED, f"nothing in the batches could be compared: {unread}", thresholds
    return Outcome.PASSED, _passed(m, runs) + (f"; {baseline[1]}" if baseline else "") + (
        f"; {unread}" if unread else ""), thresholds


def setup(r: Mapping[str, Any]) -> str:
    """`spawn, persistent_workers=True, pin_memory on`: which loader."""
    pin = ", pin_memory on" if r.get("pin_memory") else ""
    return f"{r.get('start_method')}, persistent_workers={bool(r.get('persistent_workers'))}{pin}"


def problem(r: Mapping[str, Any]) -> str:
    """What went wrong with one loader, in a line; '' when it gave num_workers=0's batches."""
    outcome = r.get("outcome")
    worker = r.get("worker_error") or ""
    theirs = f"; the worker's error: {worker}" if worker and worker not in str(r.get("error")) else ""
    if outcome == "equal":
        if r.get("pinned") is not False:
            return ""
        first = f" ({r['unpinned']}, the first)" if r.get("unpinned") else ""
        return f"with pin_memory=True the batches came back outside pinned memory{first}"
    if outcome == "differs":
        return _difference(r.get("first_difference") or {})
    if outcome == "timed out":
        return f"no batch within DataLoader's timeout (a worker hung): {r.get('error')}{theirs}"
    if outcome == "died":
        return f"a worker died: {r.get('error')}{theirs}"
    if outcome == "raised":
        return f"the loader raised {r.get('error')}{theirs}"
    if outcome == "not run":
        return f"not run: {r.get('error')}"
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


def _unread(m: Mapping[str, Any]) -> str:
    """The batch leaves that could not be read, said so ('' when every one was)."""
    unread: Mapping[str, str] = m.get("unread_leaves") or {}
    if not unread:
        return ""
    named = "; ".join(f"{k}: {why}" for k, why in unread.items())
    more = f" and {int(m.get('unread_count') or 0) - len(unread)} more" if int(m.get("unread_count") or 0) > len(
        unread) else ""
    return f"{m.get('unread_count')} batch leaves could not be read, only their types compared ({named}{more})"


def _pinning(m: Mapping[str, Any], runs: Sequence[Mapping[str, Any]]) -> str:
    """What pin_memory's loaders showed: batches pinned, nothing to judge, and the tensors DataLoader leaves alone."""
    if not m.get("pin_memory"):
        return f"pin_memory off ({m.get('pin_memory_off') or 'not on this device'})"
    pinned = [r for r in runs if r.get("pin_memory")]
    said = ("pin_memory on, batches pinned" if pinned and all(r.get("pinned") for r in pinned) else
            "pin_memory on, but no batch held a tensor DataLoader pins: pinning not judged")
    alone = list(dict.fromkeys(k for r in pinned for k in r.get("pin_not_reached") or []))[:3]
    if alone:
        said += (f" (tensors inside types without a pin_memory method, which DataLoader leaves as they are, not "
                 f"judged: {', '.join(alone)})")
    return said


def _passed(m: Mapping[str, Any], runs: Sequence[Mapping[str, Any]]) -> str:
    methods = ", ".join(dict.fromkeys(str(r.get("start_method")) for r in runs))
    epochs = sorted({int(r.get("epochs") or 0) for r in runs if r.get("persistent_workers")})
    pinned = _pinning(m, runs)
    return (f"{len(runs)} loaders with {m.get('workers')} workers ({methods}; persistent_workers off: 1 epoch, on: "
            f"{'/'.join(map(str, epochs)) or '?'}) gave num_workers=0's batches bitwise and in order "
            f"({sum(int(r.get('batches') or 0) for r in runs)} batches of {m.get('batch_size')} of {m.get('items')} "
            f"items, after the parent initialised {m.get('parent_initialised')}); {pinned}")


def _baseline(m: Mapping[str, Any]) -> tuple[bool, str] | None:
    """In compare: whether num_workers=0's orders and batches are the baseline's, and the line that says so."""
    if m.get("mode") != "compare":
        return None
    whose, vs = f"baseline {m.get('baseline_torch')}", m.get("vs_baseline")
    d = m.get("first_difference_vs_baseline") or {}
    if vs == "none":
        return True, "the baseline saved no batches (its check did not run, or failed there): not compared with it"
    if vs == "equal":
        return True, f"num_workers=0's {m.get('reference_epochs')} epochs are {whose}'s: the same order, batches bitwise"
    if vs == "within tolerance":
        return True, (f"num_workers=0's order is {whose}'s; {m.get('rounded_leaves')} floating tensors of its batches "
                      f"are not bitwise {whose}'s but within rtol {m.get('rtol'):g}, atol {m.get('atol'):g} (max abs "
                      f"diff {short(m.get('max_abs_diff_vs_baseline'))}): the dataset's torch ops round differently")
    if vs == "order":
        return False, (f"the seeded shuffle changed since {whose}: epoch {d.get('epoch')}, batch "
                       f"{int(d.get('batch') or 0) + 1} holds indices {d.get('indices')} here and "
                       f"{d.get('baseline_indices')} on the baseline (the same generator seed, num_workers=0)")
    if vs == "batch":
        return False, (f"num_workers=0's batch {int(d.get('batch') or 0) + 1} of epoch 1 is not {whose}'s: "
                       f"{d.get('key')}: {d.get('how')}")
    return False, f"no comparison with {whose}'s batches was recorded"
