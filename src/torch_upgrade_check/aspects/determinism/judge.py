"""The determinism family's typed metrics and rule (pure): two seeded training steps (determinism), or two compiled
FlexAttention training steps (deterministic-backward), bitwise equal under deterministic algorithms."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from torch_upgrade_check.analysis.closeness import short
from torch_upgrade_check.aspects._metrics import Judged, Recorded
from torch_upgrade_check.model import CheckSpec, Outcome


@dataclass(frozen=True)
class Metrics(Recorded):
    """Two steps compared tensor by tensor (worker: tensors.bitwise_diff); deterministic-backward also names the
    FlexAttention backends it ran, and why FLASH did not run."""

    bitwise_equal: bool | None = None
    differing_tensors: int | None = None
    compared_tensors: int | None = None
    max_abs_diff: float | str | None = None  # "nan", "inf" as report.json writes them
    first_differing: Sequence[str] | None = None
    backends: Mapping[str, object] | Sequence[str] | None = None
    flash_not_run: str | None = None


def judge(m: Metrics, spec: CheckSpec) -> Judged:
    what = "two seeded training steps"
    if spec.aspect == "deterministic-backward":  # the family's own words for its second aspect
        what = f"two compiled FlexAttention training steps ({', '.join(m.backends or {}) or '?'})"
    ok = bool(m.bitwise_equal)
    reason = f"{what} are bitwise equal under deterministic algorithms" if ok else (
        f"{what} differ in {m.differing_tensors} of {m.compared_tensors} tensors "
        f"(max abs diff {short(m.max_abs_diff)}; first: {', '.join((m.first_differing or [])[:3])})")
    if m.flash_not_run:
        reason += f"; BACKEND='FLASH' not run: needs {m.flash_not_run}"
    return Judged(Outcome.PASSED if ok else Outcome.FAILED, reason, {"bitwise": True})
