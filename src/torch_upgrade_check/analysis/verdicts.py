"""Observation -> CheckResult: the pass/fail rules of every aspect, with one-line reasons (pure).

Every aspect's rule is its folder's judge.py (aspects/<folder>/, its row's `folder`), on its typed Metrics; a judge.py
with `judge_within_limits` is given the team's --max-latency-ms limits too, and one with `details` writes the
result's details. Thresholds are recorded on each result.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from torch_upgrade_check.analysis.closeness import as_float, short
from torch_upgrade_check.aspects import part
from torch_upgrade_check.model import CheckResult, CheckSpec, Observation, Outcome, Status


def decide(spec: CheckSpec, obs: Observation, *, max_latency_ms: Mapping[str, float] | None = None, repro: str = "") -> CheckResult:
    """The rule of `spec`'s aspect, then what ran on the CPU under PYTORCH_ENABLE_MPS_FALLBACK (see on_the_cpu)."""
    return on_the_cpu(_decide(spec, obs, max_latency_ms=max_latency_ms, repro=repro))


def on_the_cpu(r: CheckResult) -> CheckResult:
    """A check on MPS whose ops fell back to the CPU (the worker's `mps_cpu_fallback_ops`, from torch's own
    fallback warnings) says which; one of an aspect whose judge.py has `skip_a_pass_on_the_cpu` (cross-backend) that
    passed so is skipped, for the reason it gives. A mismatch it found still fails."""
    ops = r.metrics.get("mps_cpu_fallback_ops") or []
    if not ops or r.outcome in (Outcome.SKIPPED, Outcome.ERROR):
        return r
    said = f"ran on the CPU (PYTORCH_ENABLE_MPS_FALLBACK=1): {', '.join(ops)}"
    skip = getattr(part(r.aspect, "judge"), "skip_a_pass_on_the_cpu", None)  # an aspect a CPU's pass cannot pass
    if skip is not None and r.outcome is Outcome.PASSED:
        return replace(r, outcome=Outcome.SKIPPED, reason=skip(said))
    return replace(r, reason=f"{r.reason}; {said}")


def _decide(spec: CheckSpec, obs: Observation, *, max_latency_ms: Mapping[str, float] | None = None,
            repro: str = "") -> CheckResult:
    base = {"workload": spec.workload, "aspect": spec.aspect, "device": spec.device, "dtype": spec.dtype,
            "duration_s": round(obs.duration_s, 6), "repro": repro}
    if obs.status == Status.SKIPPED:
        return CheckResult(outcome=Outcome.SKIPPED, reason=obs.message, **base)
    if obs.status in (Status.EXCEPTION, Status.CRASH, Status.TIMEOUT):
        return CheckResult(outcome=Outcome.ERROR, reason=obs.message, details=obs.traceback, metrics=dict(obs.metrics),
                           **base)
    m = dict(obs.metrics)
    judge = part(spec.aspect, "judge")
    if judge is None:
        return CheckResult(outcome=Outcome.ERROR, reason=f"no rule for aspect {spec.aspect!r}", metrics=m, **base)
    # the aspect's own rule, on its typed metrics (and the team's latency limits, if it asks for them)
    limited = getattr(judge, "judge_within_limits", None)
    typed = judge.Metrics.from_dict(m)
    outcome, reason, thresholds, derived = (limited(typed, spec, max_latency_ms or {}) if limited is not None
                                            else judge.judge(typed, spec))
    m.update(derived)
    own = getattr(judge, "details", None)  # an aspect whose details are its own (its judge.py says)
    details = own(judge.Metrics.from_dict(m)) if own is not None else _mismatch_details(m)
    if not details and isinstance(m.get("vs_baseline"), Mapping):  # fsdp2, ddp: the steps unlike the baseline's
        details = _mismatch_details(m["vs_baseline"])
    return CheckResult(outcome=outcome, reason=reason, metrics=m, thresholds=thresholds, details=details, **base)


def latency_limit(spec: CheckSpec, limits: Mapping[str, float]) -> float | None:
    """The limit whose key names this workload or matches its check id (exact name first)."""
    if spec.workload in limits:
        return float(limits[spec.workload])
    for pattern, limit in limits.items():
        if fnmatch.fnmatchcase(spec.id, pattern.replace("[", "[[]")) or fnmatch.fnmatchcase(spec.workload, pattern):
            return float(limit)
    return None


def _mismatch_details(m: Mapping[str, Any]) -> str:
    rows = m.get("top_mismatches") or []
    if not rows:
        return ""
    lines = ["largest mismatches (index: got vs expected, abs err):"]
    lines += [f"  {r['index']}: {short(r['got'])} vs {short(r['expected'])}, {short(r['abs_err'])}" for r in rows]
    return "\n".join(lines)


def format_ms(value: float) -> str:
    if math.isnan(value):
        return "n/a"
    if value >= 1000:
        return f"{value / 1000:.3g} s"
    if value >= 1:
        return f"{value:.3g} ms"
    return f"{value * 1000:.3g} µs"


def format_bytes(n: Any) -> str:
    v = as_float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(v) < 1024 or unit == "GiB":
            return f"{v:.0f} {unit}" if unit == "B" else f"{v:.1f} {unit}"
        v /= 1024
    return f"{v:.1f} GiB"
