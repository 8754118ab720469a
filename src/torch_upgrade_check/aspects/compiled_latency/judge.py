"""The compiled-latency rule (pure): latency's (aspects/latency/judge.py), its reason naming the compile it left
out of the timed calls."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from torch_upgrade_check.analysis.verdicts import format_ms
from torch_upgrade_check.aspects._metrics import Judged
from torch_upgrade_check.aspects.latency import judge as latency
from torch_upgrade_check.model import CheckSpec


@dataclass(frozen=True)
class Metrics(latency.Metrics):
    """Latency's, and the compile a worker's first call paid (`compile_s`), outside the timed calls."""

    compile_s: float | None = None
    compiled_s: float | None = None
    graphs_compiled: int | None = None


def judge(m: Metrics, spec: CheckSpec) -> Judged:
    return judge_within_limits(m, spec, {})


def judge_within_limits(m: Metrics, spec: CheckSpec, max_latency_ms: Mapping[str, float]) -> Judged:
    outcome, reason, thresholds, derived = latency.judge_within_limits(m, spec, max_latency_ms)
    if m.compile_s is not None:
        reason += f"; compiled in {format_ms(float(m.compile_s) * 1000.0)} (not timed)"
    return Judged(outcome, reason, thresholds, derived)
