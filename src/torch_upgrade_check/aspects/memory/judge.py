"""The memory rule (pure): recorded, and passes when measured (compare judges it A/B: analysis.abjudge)."""

from __future__ import annotations

from dataclasses import dataclass

from torch_upgrade_check.analysis.verdicts import format_bytes
from torch_upgrade_check.aspects._metrics import Judged, Recorded
from torch_upgrade_check.model import CheckSpec, Outcome


@dataclass(frozen=True)
class Metrics(Recorded):
    """The peak the backend's counter read (bytes) and which counter; the host RAM's peak resident set growth."""

    peak_bytes: int | float | None = None
    memory_api: str | None = None
    resident_bytes: int | None = None
    host_peak_bytes: int | float | None = None
    host_memory_api: str | None = None


def judge(m: Metrics, spec: CheckSpec) -> Judged:
    reason = f"peak {format_bytes(m.peak_bytes if m.has('peak_bytes') else 0)} ({m.memory_api if m.has('memory_api') else '?'})"
    if m.has("host_peak_bytes"):
        reason += f"; host RAM +{format_bytes(m.host_peak_bytes)} (peak resident set growth)"
    return Judged(Outcome.PASSED, reason, {})
