"""The fsdp2 aspect's typed metrics and rule (pure), DDP's too in its own words (aspects/ddp/judge.py).

Under torchrun every rank exited 0 and shut its process group down within the shutdown bound (a rank still running
then is named, and was killed); each step's reduced gradient shards within FSDP2_GRAD_TOL (of each gradient's RMS) of
the unsharded model's gradients (a shard that could not be compared fails), each step's loss and the parameters after
the sharded steps within FSDP2_ATOL or FSDP2_RTOL*|unsharded| (NaN fails). DDP's gradients are whole, all-reduced on
every rank: each is one "shard" of itself to this rule.

compare's candidate is also judged against the baseline's steps: each step's global loss and reduced gradients, and
the parameters after the steps, by the cross-version rule (analysis.closeness): the baseline's fp64 golden the
yardstick and the baseline's own error its noise floor; the candidate's own fp64 golden unchanged from the
baseline's. A torch that changes the wrapped and the unsharded model alike (a kernel both call) passes the
comparison with the unsharded model and fails this one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from torch_upgrade_check.analysis import closeness
from torch_upgrade_check.analysis.closeness import as_float, short
from torch_upgrade_check.analysis.verdicts import format_bytes
from torch_upgrade_check.aspects._metrics import Judged, Recorded
from torch_upgrade_check.model import CheckSpec, Outcome

FSDP2_ATOL = 1e-5
FSDP2_RTOL = 1e-4
# fsdp2 (float32, the one dtype it runs): a reduced gradient shard's largest error, in units of the unsharded
# gradient's RMS. Two gloo ranks show 3e-6 on transformer_block (the sharded forward batches 2 samples, the
# unsharded 4: float32 rounding); a collective off by 0.1% shows 1e-3 or more. What it promises: a reduction
# whose error reaches 1e-4 of a gradient's RMS in any element fails.
FSDP2_GRAD_TOL = 1e-4


@dataclass(frozen=True)
class Metrics(Recorded):
    """A distributed check's metrics (worker: aspects.fsdp2.run, aspects.ddp.run; worker.torchrun adds the ranks')."""

    world_size: int | None = None
    backend: str | None = None
    launcher: str | None = None
    steps: int | None = None
    max_grad_err: float | str | None = None  # in units of each gradient's RMS; "nan" as report.json writes it
    worst_grad: str | None = None
    worst_grad_step: int | None = None
    worst_grad_rank: int | None = None
    grad_shards_compared: int | None = None
    grad_shards_unmatched: int | None = None
    unmatched_grad: str | None = None
    max_abs_err: float | str | None = None
    max_rel_err: float | str | None = None
    max_loss_err: float | str | None = None
    max_loss_rel_err: float | str | None = None
    worst_loss_step: int | None = None
    shutdown_timeout_s: float | None = None
    hung_ranks: Sequence[int] | None = None
    left_running: Sequence[int] | None = None
    torchrun_exit: int | None = None
    torchrun_tail: str | None = None
    rank_peak_host_bytes: Sequence[int | None] | None = None
    shutdown_s: Sequence[float | None] | None = None
    mode: str | None = None  # "compare": the candidate, also against the baseline's steps
    vs_baseline: Mapping[str, Any] | None = None  # the cross-version rule's metrics of the steps against the baseline's
    baseline_missing: str | None = None


@dataclass(frozen=True)
class Words:
    """How a distributed check's reasons name its model and gradients (one rule, fsdp2's, judges both)."""

    model: str  # "the sharded model's loss"
    gradients: str  # "the reduced gradients differ"
    piece: str  # "shard of linear1.weight"
    one: str  # "no reduced gradient shard was compared"; "24 reduced gradient shards could not be"
    counted: str  # "72 reduced gradient shards within …"


WORDS = Words("sharded", "reduced gradients", "shard", "reduced gradient shard", "reduced gradient shards")


def judge(m: Metrics, spec: CheckSpec | None = None) -> Judged:
    """fsdp2's rule in its own words (the dtype is the spec's: float32, the one it runs)."""
    return distributed(m, WORDS, spec.dtype if spec is not None else "float32")


def distributed(m: Metrics, words: Words, dtype: str) -> Judged:
    """Under torchrun, against the unsharded model; compare's candidate also against the baseline's steps."""
    outcome, reason, thresholds = _under_torchrun(m, words)
    if m.mode == "compare":
        outcome, reason, thresholds = _and_baseline(m, words, dtype, (outcome, reason, thresholds))
    return Judged(outcome, reason, thresholds)


def _fsdp2(m: Metrics, words: Words) -> tuple[Outcome, str, dict[str, Any]]:
    """Every step's reduced gradient shards within FSDP2_GRAD_TOL of the unsharded gradients' RMS, every one of them
    compared, and each step's loss and the parameters after the steps within FSDP2_ATOL (or FSDP2_RTOL) of the
    unsharded model's. A missing or NaN figure fails (an old worker, a NaN parameter)."""
    grad = as_float(m.max_grad_err)
    thresholds = {"atol": FSDP2_ATOL, "rtol": FSDP2_RTOL, "grad_tol": FSDP2_GRAD_TOL,
                  "grad_tol_scaled_by": "each unsharded gradient's RMS"}
    where = f"{m.world_size} ranks ({m.backend})"
    shards = (f"{m.grad_shards_compared} {words.counted} within {short(grad)} of each gradient's RMS "
              f"(worst {m.worst_grad}, "
              f"step {m.worst_grad_step}, rank {m.worst_grad_rank}; at most {FSDP2_GRAD_TOL:g})")
    params = _fsdp2_errors("parameters", m.max_abs_err, m.max_rel_err)
    losses = _fsdp2_errors("losses", m.max_loss_err, m.max_loss_rel_err)
    if not m.grad_shards_compared:  # the worker's worst error starts at 0.0: none compared must not pass
        return Outcome.FAILED, f"no {words.one} was compared with the unsharded model's on {where}", thresholds
    if not grad <= FSDP2_GRAD_TOL:  # NaN (an old worker) fails too
        return Outcome.FAILED, (f"the {words.gradients} differ from the unsharded model's on {where}: {words.piece} of "
                                f"{m.worst_grad} at step {m.worst_grad_step} (rank "
                                f"{m.worst_grad_rank}) off by {short(grad)} of its RMS, beyond "
                                f"{FSDP2_GRAD_TOL:g}; {params}"), thresholds
    if m.grad_shards_unmatched != 0:  # missing: an old worker, which skipped such shards silently
        return Outcome.FAILED, (f"{m.grad_shards_unmatched} {words.one}s on {where} could not be "
                                f"compared with the unsharded model's gradient: their shape is not its chunk along "
                                f"their shard dimension (first: {m.unmatched_grad}); {shards}"), thresholds
    if not _fsdp2_within(m.max_abs_err, m.max_rel_err):
        return Outcome.FAILED, (f"differs from the unsharded model after {m.steps} steps on {where}: {params}; "
                                f"{shards}"), thresholds
    if not _fsdp2_within(m.max_loss_err, m.max_loss_rel_err):
        return Outcome.FAILED, (f"the {words.model} model's loss differs from the unsharded model's on {where} (worst at step "
                                f"{m.worst_loss_step}): {losses}, beyond {FSDP2_ATOL:g} (or {FSDP2_RTOL:g} "
                                f"relative); {shards}; {params}"), thresholds
    return Outcome.PASSED, (f"matches the unsharded model in each of {m.steps} steps on {where}: {shards}; "
                            f"{losses}; {params}"), thresholds


def _under_torchrun(m: Metrics, words: Words) -> tuple[Outcome, str, dict[str, Any]]:
    """Every rank shut down within the bound and exited 0 under torchrun, then the fsdp2 rule. A missing figure
    fails (an old worker)."""
    outcome, reason, thresholds = _fsdp2(m, words)
    thresholds = {**thresholds, "shutdown_timeout_s": m.shutdown_timeout_s}
    where = f"{m.world_size} ranks ({m.backend}, {m.launcher})"
    hung, left = m.hung_ranks, m.left_running
    if hung is None or left is None or hung or left:
        ranks = ", ".join(f"rank {r}" for r in hung or []) or "a rank"
        return Outcome.FAILED, (f"{ranks} did not finish destroy_process_group within {m.shutdown_timeout_s} s "
                                f"of the last rank reaching it on {where}: the process group's shutdown hangs "
                                f"(pids {left or '?'} left running, killed); the training steps: {reason}"), thresholds
    if m.torchrun_exit != 0:
        tail = (m.torchrun_tail or "").strip().splitlines()[-1:] or [""]
        return Outcome.FAILED, (f"torchrun exited {m.torchrun_exit} after every rank shut down on {where}: "
                                f"a rank's exit status was not 0 ({tail[0]}); the training steps: {reason}"), thresholds
    peaks = ", ".join(format_bytes(b) if isinstance(b, int) else "?" for b in m.rank_peak_host_bytes or [])
    shut = ", ".join(f"{s:.2f} s" if isinstance(s, (int, float)) else "?" for s in m.shutdown_s or [])
    return outcome, f"{reason}; every rank exited 0, shut down in {shut}; peak host RAM per rank {peaks}", thresholds


def _and_baseline(m: Metrics, words: Words, dtype: str,
                  alone: tuple[Outcome, str, dict[str, Any]]) -> tuple[Outcome, str, dict[str, Any]]:
    """compare's candidate: the comparison with the unsharded model, then the one with the baseline's steps."""
    outcome, reason, thresholds = alone
    ok, said, against = _against_baseline(m, words.model, dtype)
    thresholds = {**thresholds, "vs_baseline": against}
    if outcome is Outcome.PASSED and not ok:
        return Outcome.FAILED, f"{said}; against the unsharded model: {reason}", thresholds
    return outcome, f"{reason}; against the baseline: {said}", thresholds


def _against_baseline(m: Metrics, model: str, dtype: str) -> tuple[bool, str, dict[str, Any]]:
    """(passed, what it says, its thresholds): `model` names the wrapped model ("DDP", "sharded"). Nothing compared
    (the baseline saved no steps, or an old worker) fails: a candidate compare judged on its own is not judged."""
    sub = m.vs_baseline
    if not isinstance(sub, Mapping):
        why = m.baseline_missing or "the worker reported no comparison"
        return False, f"not compared with the baseline's {model} steps: {why}", {}
    outcome, why, thresholds = closeness.judge(sub, "cross-version", dtype)
    changed = closeness.fp64_change(sub)
    against = f"baseline {sub.get('baseline_torch')}'s"
    if outcome is Outcome.PASSED and not changed:
        return True, f"its losses, gradients and parameters as close to the fp64 golden as {against}: {why}", thresholds
    return False, (f"the {model} model's losses, gradients or parameters differ from {against} {model} steps: "
                   f"{'; '.join(x for x in (why if outcome is not Outcome.PASSED else '', changed) if x)}"), thresholds


def _fsdp2_within(abs_err: Any, rel_err: Any) -> bool:
    """Within FSDP2_ATOL or FSDP2_RTOL relative; NaN (a NaN tensor, or no figure) is never within."""
    return as_float(abs_err) <= FSDP2_ATOL or as_float(rel_err) <= FSDP2_RTOL


def _fsdp2_errors(what: str, abs_err: Any, rel_err: Any) -> str:
    return f"{what} max abs err {short(abs_err)}, max rel err {short(rel_err)}"
