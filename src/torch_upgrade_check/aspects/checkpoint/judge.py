"""The checkpoint aspect's typed metrics and rule (pure): the training state saved, loaded with this torch's default
torch.load and resumed gives the uninterrupted step bitwise; in compare the candidate loads the baseline's file and
its resumed step is within tolerance of the baseline's (a failure says first when the seeded random stream changed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from torch_upgrade_check.analysis.closeness import short
from torch_upgrade_check.aspects._metrics import Judged, Recorded
from torch_upgrade_check.aspects._training import random_stream_line
from torch_upgrade_check.model import CheckSpec, Outcome


@dataclass(frozen=True)
class Metrics(Recorded):
    """The checkpoint check's metrics (worker: aspects.checkpoint.run)."""

    mode: str | None = None  # "compare": the candidate, resuming from the baseline's file
    baseline_torch: str | None = None
    loaded: bool | None = None
    load_error: str | None = None
    fix: str | None = None
    resume_error: str | None = None
    contents: Sequence[str] | None = None
    bitwise_equal: bool | None = None
    differing_tensors: int | None = None
    compared_tensors: int | None = None
    first_differing: Sequence[str] | None = None
    rtol: float | None = None
    atol: float | None = None
    mismatched_count: int | None = None
    uncompared: Sequence[str] | None = None
    max_abs_err: float | str | None = None  # "nan", "inf" as report.json writes them
    random_stream_changed: Mapping[str, Any] | None = None


def judge(m: Metrics, spec: CheckSpec | None = None) -> Judged:
    """Loaded with the default torch.load and resumed: bitwise alone, within tolerance of the baseline's step."""
    whose = f"baseline {m.baseline_torch}'s checkpoint" if m.mode == "compare" else "the checkpoint"
    if not m.loaded:
        fix = f"; fix: {m.fix}" if m.fix else ""
        return Judged(Outcome.FAILED, f"torch.load with this torch's defaults cannot load {whose}: {m.load_error}{fix}",
                      {})
    if m.resume_error:
        return Judged(Outcome.FAILED, f"{whose} loaded but does not restore the training state: {m.resume_error}", {})
    first = ", ".join((m.first_differing or [])[:3])
    if m.mode == "compare":
        return _against_baseline(m, whose, first)
    contents = ", ".join(m.contents or [])
    if m.bitwise_equal:
        return Judged(Outcome.PASSED, (f"saved ({contents}), loaded with the default torch.load, and the resumed step "
                                       f"is bitwise equal to the uninterrupted one"), {"bitwise": True})
    return Judged(Outcome.FAILED, (f"the step resumed from the checkpoint ({contents}) differs from the uninterrupted "
                                   f"one in {m.differing_tensors} of {m.compared_tensors} tensors (first: {first}): "
                                   f"saving and loading loses training state"), {"bitwise": True})


def _against_baseline(m: Metrics, whose: str, first: str) -> Judged:
    tol = {"rtol": m.rtol, "atol": m.atol}
    how = "bitwise equal" if m.bitwise_equal else f"max abs err {short(m.max_abs_err)}"
    if not m.mismatched_count and not m.uncompared:
        return Judged(Outcome.PASSED, (f"loaded {whose} with the default torch.load; the step resumed from it matches "
                                       f"the baseline's ({how})"), tol)
    return Judged(Outcome.FAILED, (f"{random_stream_line(m.random_stream_changed)}the step resumed from {whose} "
                                   f"differs from the baseline's: {m.mismatched_count} elements beyond tolerance (max "
                                   f"abs err {short(m.max_abs_err)}; first: {first})"), tol)
