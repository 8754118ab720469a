"""The latency rule (pure): the median of the forward's timed samples, held to the team's --max-latency-ms limit
for the workload where one names it; compiled-latency's rule is this one (aspects/compiled_latency/judge.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from torch_upgrade_check.analysis import stats
from torch_upgrade_check.analysis.verdicts import format_ms, latency_limit
from torch_upgrade_check.aspects._metrics import Judged, Timed
from torch_upgrade_check.model import CheckSpec, Outcome


@dataclass(frozen=True)
class Metrics(Timed):
    """A forward's timed samples (ms a call, each the mean of `inner_loops` calls) and the threads it ran on; the
    median and IQR the rule derives from them (in compare, the A/B engine's figures beside them)."""

    threads: int | None = None


def judge(m: Metrics, spec: CheckSpec) -> Judged:
    return judge_within_limits(m, spec, {})


def judge_within_limits(m: Metrics, spec: CheckSpec, max_latency_ms: Mapping[str, float]) -> Judged:
    """Passes unless a --max-latency-ms limit for the workload is exceeded by the median; no samples fail."""
    samples = [float(x) for x in m.samples_ms or []]
    med, spread = stats.median(samples), stats.iqr(samples)
    derived = {"median_ms": med, "iqr_ms": spread}
    limit = latency_limit(spec, max_latency_ms)
    text = f"median {format_ms(med)} (IQR {format_ms(spread)}, {len(samples)} samples)"
    if not samples:
        return Judged(Outcome.FAILED, "no latency samples were taken", {}, derived)
    if limit is None:
        return Judged(Outcome.PASSED, text, {}, derived)
    ok = med <= limit
    reason = f"{text} {'≤' if ok else '>'} limit {format_ms(limit)}"
    return Judged(Outcome.PASSED if ok else Outcome.FAILED, reason, {"max_latency_ms": limit}, derived)
