"""compare's decisions on both sides' results (pure): one side's check, a candidate failure the baseline shares, and
the checks judged by what changed since the baseline."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace

from torch_upgrade_check.analysis.shared import SHARED_FACTOR, SHARED_KEY, judge_shared
from torch_upgrade_check.analysis.verdicts import decide
from torch_upgrade_check.aspects import part
from torch_upgrade_check.model import CheckResult, CheckSpec, Observation, Outcome, Report, Status


def decide_side(spec: CheckSpec, obs: Observation, repro: str, limits: dict[str, float]) -> CheckResult:
    """One side's check: the usual rules; a baseline's save of an aspect whose judge.py says what it saved
    (`saved_for_the_candidate`: cross-version's) passes once written, and a failure of one whose judge.py names where
    the candidate first left the baseline (`first_divergence`) says so."""
    judge = part(spec.aspect, "judge")
    saved = getattr(judge, "saved_for_the_candidate", None)
    if obs.status == Status.OK and saved is not None and spec.params.get("mode") == "save":
        return CheckResult(spec.workload, spec.aspect, spec.device, spec.dtype, Outcome.PASSED,
                           reason=saved(judge.Metrics.from_dict(obs.metrics)),
                           metrics=dict(obs.metrics), duration_s=obs.duration_s, repro=repro)
    result = decide(spec, obs, max_latency_ms=limits, repro=repro)
    lead = getattr(judge, "first_divergence", None)
    return lead(result) if lead is not None else result


def mark_preexisting(baseline: Report, candidate: Report, fail_on_shared: bool = False) -> Report:
    """A candidate failure that the baseline shares says so. A correctness failure the baseline shares at the same
    size (analysis.shared) is the model's own: a warning (suspicious, metrics[SHARED_KEY]), or with `fail_on_shared`
    (--fail-on-shared-failures) still a failure; any other shared failure or error fails as before, saying it is not
    new."""
    base = {r.id: r for r in baseline.results}
    return replace(candidate, results=tuple(_preexisting(base.get(r.id), r, baseline.label, fail_on_shared)
                                            for r in candidate.results))


def _preexisting(b: CheckResult | None, r: CheckResult, label: str, fail_on_shared: bool) -> CheckResult:
    if b is None:
        return r
    if r.outcome in (Outcome.FAILED, Outcome.SKIPPED, Outcome.ERROR) and b.outcome is Outcome.PASSED:
        return replace(r, reason=f"{r.reason} (passed on baseline {label}: new in the candidate)")
    if r.outcome not in (Outcome.FAILED, Outcome.ERROR) or b.outcome is not r.outcome:
        return r
    shared = judge_shared(b, r)
    if shared is None:
        return replace(r, reason=f"{r.reason} (also {b.outcome.value} on baseline {label}: not new)")
    if not shared.same:
        return replace(r, reason=f"{r.reason} (also failed on baseline {label}, {shared.why})")
    metrics = {**r.metrics, SHARED_KEY: {"baseline": label, "baseline_reason": b.reason, "why": shared.why}}
    thresholds = {**r.thresholds, "fail_on_shared_failures": fail_on_shared, "shared_factor": SHARED_FACTOR}
    if fail_on_shared:
        return replace(r, metrics=metrics, thresholds=thresholds,
                       reason=f"{r.reason} (also failed on baseline {label} {shared.why}: the model's own, not new; "
                              f"fail-on-shared-failures fails it)")
    return replace(r, outcome=Outcome.SUSPICIOUS, metrics=metrics, thresholds=thresholds,
                   reason=f"the model's own, not the upgrade's: also failed on baseline {label} {shared.why} "
                          f"(set fail-on-shared-failures to fail on it); {r.reason}")


def judge_against_baseline(baseline: Report, candidate: Report, fail_on: Collection[str]) -> Report:
    """The candidate's checks that are judged by what changed since the baseline, not alone: each by its aspect's
    `judge_in_compare` (its judge.py: warnings new in the candidate, compile's new graph breaks and recompiles, the
    SDPA backend the default picks, compile-cache's warm process that no longer loads from the cache, ...), only where
    both sides' checks passed, or where its `judged_in_compare_though_skipped` says a skipped candidate is judged too."""
    base = {r.id: r for r in baseline.results}
    results = []
    for r in candidate.results:
        b = base.get(r.id)
        both_passed = b is not None and r.outcome is Outcome.PASSED and b.outcome is Outcome.PASSED
        own = getattr(part(r.aspect, "judge"), "judge_in_compare", None)  # a foldered aspect's own compare rule
        skipped = getattr(part(r.aspect, "judge"), "judged_in_compare_though_skipped", None)  # its skips it judges
        judged = own is not None and (both_passed or (skipped is not None and skipped(b, r)))
        results.append(own(b, r, baseline, candidate, fail_on) if judged else r)
    return replace(candidate, results=tuple(results))


