"""Baseline vs candidate torch on one machine in one job: which checks each side runs, cross-version
numerics, and how a side's results are decided (latency and memory A/B live in `measure`)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from torch_upgrade_check.analysis.verdicts import decide
from torch_upgrade_check.model import CheckResult, CheckSpec, Observation, Outcome, Report
from torch_upgrade_check.orchestrate import session

AB_ASPECTS = ("latency", "memory")


@dataclass(frozen=True)
class Side:
    role: str  # baseline | candidate
    python: str
    report: Report


@dataclass(frozen=True)
class Thresholds:
    latency: float = 0.10
    memory: float = 0.20


def correctness_specs(settings: session.Settings, device: str) -> list[CheckSpec]:
    """Everything but latency/memory (measured A/B) and cross-version (added per side)."""
    return session.plan(settings, device, aspects=[a for a in _all_aspects(settings) if a not in (*AB_ASPECTS,
                                                                                                     "cross-version")])


def _all_aspects(settings: session.Settings) -> list[str]:
    return sorted({a for w in settings.workloads for a in w.aspects})


def saved_mark(store: Path) -> Path:
    """The file that says the baseline has saved all it will: a candidate's cross-version check waits for it."""
    return store / ".complete"


def cross_version_specs(settings: session.Settings, device: str, store: Path, mode: str) -> list[CheckSpec]:
    """One cross-version check per workload and dtype: every built-in with numerics, and the user's
    workloads that list cross-version among their aspects (the default). The candidate's (mode "compare")
    start only once the baseline's are complete (param "after": the worker waits for that file)."""
    after = {"after": str(saved_mark(store))} if mode == "compare" else {}
    wanted = {w.name for w in settings.workloads if "cross-version" in w.aspects or (not w.factory and "numerics" in w.aspects)}
    specs = []
    for s in session.plan(replace(settings, only=()), device, aspects=["numerics", "cross-version"]):  # --only: below
        spec = CheckSpec(s.workload, "cross-version", device, s.dtype, s.factory,
                         {**s.params, "mode": mode, "store": str(store), **after})
        if s.workload in wanted and spec.id not in {x.id for x in specs} and _selected(settings, spec):
            specs.append(spec)
    return specs


def _selected(settings: session.Settings, spec: CheckSpec) -> bool:
    from torch_upgrade_check.suite import _matches

    return not settings.only or any(_matches(p, spec) or _matches(p, replace(spec, aspect="numerics"))
                                    for p in settings.only)


def decide_side(spec: CheckSpec, obs: Observation, repro: str, limits: dict[str, float]) -> CheckResult:
    """One side's check: the usual rules, and for cross-version the baseline's save or the candidate's verdict."""
    if obs.status == "ok" and spec.params.get("mode") == "save":
        return CheckResult(spec.workload, spec.aspect, spec.device, spec.dtype, Outcome.PASSED,
                           reason=f"outputs saved for the candidate ({obs.metrics.get('tensors')} tensors)",
                           metrics=dict(obs.metrics), duration_s=obs.duration_s, repro=repro)
    result = decide(spec, obs, max_latency_ms=limits, repro=repro)
    first = result.metrics.get("first_divergent_module")
    if result.outcome is Outcome.FAILED and first:
        result = replace(result, reason=f"{result.reason}; first divergent module: {first['module']} "
                                        f"(max abs err {first['max_abs_err']:.3g})")
    return result


def mark_preexisting(baseline: Report, candidate: Report) -> Report:
    """A candidate failure that the baseline shares is still a failure, but says it is not new."""
    base = {r.id: r for r in baseline.results}
    results = []
    for r in candidate.results:
        b = base.get(r.id)
        note = ""
        if r.outcome in (Outcome.FAILED, Outcome.ERROR) and b is not None and b.outcome is r.outcome:
            note = f" (also {b.outcome.value} on baseline {baseline.label}: not new)"
        elif r.outcome in (Outcome.FAILED, Outcome.ERROR, Outcome.SKIPPED) and b is not None and b.outcome is Outcome.PASSED:
            note = f" (passed on baseline {baseline.label}: new in the candidate)"
        results.append(replace(r, reason=r.reason + note) if note else r)
    return replace(candidate, results=tuple(results))
