"""compare's decisions on both sides' results (pure): one side's check, a candidate failure the baseline shares, and
the checks judged by what changed since the baseline."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import replace
from typing import Any

from torch_upgrade_check.analysis.shared import SHARED_FACTOR, SHARED_KEY, judge_shared
from torch_upgrade_check.analysis.verdicts import decide
from torch_upgrade_check.aspects import part
from torch_upgrade_check.model import CheckResult, CheckSpec, Observation, Outcome, Report, Status


def decide_side(spec: CheckSpec, obs: Observation, repro: str, limits: dict[str, float]) -> CheckResult:
    """One side's check: the usual rules, and for cross-version the baseline's save or the candidate's verdict."""
    if obs.status == Status.OK and spec.aspect == "cross-version" and spec.params.get("mode") == "save":
        return CheckResult(spec.workload, spec.aspect, spec.device, spec.dtype, Outcome.PASSED,
                           reason=f"outputs saved for the candidate ({obs.metrics.get('tensors')} tensors)",
                           metrics=dict(obs.metrics), duration_s=obs.duration_s, repro=repro)
    result = decide(spec, obs, max_latency_ms=limits, repro=repro)
    first = result.metrics.get("first_divergent_module")
    if result.outcome is Outcome.FAILED and first:
        result = replace(result, reason=f"{result.reason}; first divergent module: {first['module']} "
                                        f"(max abs err {first['max_abs_err']:.3g})")
    op = result.metrics.get("first_divergent_op")
    if result.outcome is Outcome.FAILED and isinstance(op, dict):
        result = replace(result, reason=f"{first_op_line(op)}; {result.reason}")
        if op.get("repro"):
            result = replace(result, repro=(f"{repro.rstrip()}\n# the first aten op that changed, alone (in the report "
                                            f"folder, with the baseline's inputs):\n{op['repro']}").lstrip("\n"))
    return result


def first_op_line(op: Mapping[str, Any]) -> str:
    """The first aten op whose output, on the baseline's recorded inputs, left the tolerance: what a reader of a
    failed cross-version check needs first."""
    if not op.get("op"):
        bound = " (the recording was truncated: a later op may have changed)" if op.get("truncated") else ""
        calls = op.get("calls_changed")
        where = (f"; the ops called changed at op {int(calls.get('index', 0)) + 1}: the baseline called "
                 f"{calls.get('baseline')}, the candidate {calls.get('candidate')}" if isinstance(calls, dict) else "")
        return (f"no aten op's kernel changed on the baseline's inputs ({op.get('replayed')} of {op.get('of')} "
                f"replayed){bound}{where}")
    how = (f"raises {op['error']}" if op.get("error") else
           f"output {op.get('output')} off by max abs err {op.get('max_abs_err', float('nan')):.3g}")
    return (f"first aten op that changed: {op['op']} in {op.get('module')} (op {int(op.get('index', 0)) + 1} of "
            f"{op.get('of')}; inputs {', '.join(op.get('inputs') or []) or 'none'} -> "
            f"{', '.join(op.get('outputs') or []) or 'none'}): {how}")


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
    """The candidate's checks that are judged by what changed since the baseline, not alone: warnings new in the
    candidate (suspicious, or failed under `--fail-on warnings`), compile's new graph breaks and recompiles
    (failed, unless the workload allows graph breaks), the SDPA backend the default picks (shown, not
    judged: a backend that is wrong fails on its own), and compile-cache's warm process that no longer loads from the
    cache what the baseline's loaded (suspicious). Each only where both sides' checks passed (compile-cache's also
    where the candidate's was skipped for caching nothing)."""
    base = {r.id: r for r in baseline.results}
    judges = {"sdpa-backends": lambda b, r: _new_default_backend(b, r, baseline.label)}
    results = []
    for r in candidate.results:
        b = base.get(r.id)
        both_passed = b is not None and r.outcome is Outcome.PASSED and b.outcome is Outcome.PASSED
        own = getattr(part(r.aspect, "judge"), "judge_in_compare", None)  # a foldered aspect's own compare rule
        skipped = getattr(part(r.aspect, "judge"), "judged_in_compare_though_skipped", None)  # its skips it judges
        if own is not None:
            judged = both_passed or (skipped is not None and skipped(b, r))
            results.append(own(b, r, baseline, candidate, fail_on) if judged else r)
            continue
        results.append(judges[r.aspect](b, r) if both_passed and r.aspect in judges else r)
    return replace(candidate, results=tuple(results))


def _new_default_backend(before: CheckResult, after: CheckResult, label: str) -> CheckResult:
    old, now = before.metrics.get("default_backend") or {}, after.metrics.get("default_backend") or {}
    changed = {case: (old[case], name) for case, name in now.items() if case in old and old[case] != name}
    if not changed:
        return after
    text = ", ".join(f"{case}: {was} → {name}" for case, (was, name) in changed.items())
    return replace(after, reason=f"{after.reason}; the default backend changed since baseline {label}: {text}",
                   metrics={**after.metrics, "default_backend_changed": {k: list(v) for k, v in changed.items()}})
