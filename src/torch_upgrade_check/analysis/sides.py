"""compare's decisions on both sides' results (pure): one side's check, a candidate failure the baseline shares, and
the checks judged by what changed since the baseline."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import replace
from typing import Any

from torch_upgrade_check.analysis.closeness import plural_of
from torch_upgrade_check.analysis.shared import SHARED_FACTOR, SHARED_KEY, judge_shared
from torch_upgrade_check.analysis.verdicts import decide
from torch_upgrade_check.aspects import COMPILE_ASPECTS, part
from torch_upgrade_check.model import CheckResult, CheckSpec, Observation, Outcome, Report, Side, Status


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
    """The candidate's checks that are judged by what changed since the baseline, not alone: warnings new in the
    candidate (suspicious, or failed under `--fail-on warnings`), compile's new graph breaks and recompiles
    (failed, unless the workload allows graph breaks), the SDPA backend the default picks (shown, not
    judged: a backend that is wrong fails on its own), and compile-cache's warm process that no longer loads from the
    cache what the baseline's loaded (suspicious). Each only where both sides' checks passed (compile-cache's also
    where the candidate's was skipped for caching nothing)."""
    base = {r.id: r for r in baseline.results}
    judges = {**dict.fromkeys(COMPILE_ASPECTS, lambda b, r: _new_graph_breaks(b, r, baseline.label)),
              "compile-cache": lambda b, r: _cache_no_longer_used(b, r, baseline.label)}
    results = []
    for r in candidate.results:
        b = base.get(r.id)
        both_passed = b is not None and r.outcome is Outcome.PASSED and b.outcome is Outcome.PASSED
        own = getattr(part(r.aspect, "judge"), "judge_in_compare", None)  # a foldered aspect's own compare rule
        if own is not None:
            results.append(own(b, r, baseline, candidate, fail_on) if both_passed else r)
            continue
        results.append(judges[r.aspect](b, r) if (both_passed or _cached_nothing(b, r)) and r.aspect in judges else r)
    return replace(candidate, results=tuple(results))


def _new_graph_breaks(before: CheckResult, after: CheckResult, label: str) -> CheckResult:
    """A graph break or a recompile the baseline did not have turns compiled code back into slow eager code; so does
    a recompile at one of the workload's dynamic sizes (each size's graphs against the baseline's at that size)."""
    m, b = after.metrics, before.metrics
    breaks, was = int(m.get("graph_breaks") or 0), int(b.get("graph_breaks") or 0)
    graphs, graphs_was = int(m.get("graphs_compiled") or 0), int(b.get("graphs_compiled") or 0)
    lost_fullgraph = b.get("fullgraph") is True and m.get("fullgraph") is False
    lost_step = b.get("training_step") is True and m.get("training_step") is False
    recompiled = _new_recompiles(b, m)
    if breaks <= was and graphs <= graphs_was and not lost_fullgraph and not lost_step and not recompiled:
        return after  # the same number of breaks with other words for them is not news
    new_reasons = [x for x in m.get("graph_break_reasons") or [] if x not in (b.get("graph_break_reasons") or [])]
    found = []
    if breaks > was or new_reasons:
        found.append(f"{plural_of(breaks, 'graph break')} (baseline {label}: {was})"
                     + (f": {'; '.join(new_reasons[:2])}" if new_reasons else ""))
    if lost_fullgraph:
        skipped = [x for x in m.get("dynamo_fallbacks") or [] if x not in (b.get("dynamo_fallbacks") or [])]
        why = f": {str(m['fullgraph_error'])[:160]}" if m.get("fullgraph_error") else ""
        found.append(f"no longer one graph (fullgraph=True fails{why})" + (f"; skipped: {skipped[0]}" if skipped else ""))
    if graphs > graphs_was:
        found.append(f"{graphs} graphs compiled, baseline {graphs_was} (a new break or a recompile)")
    if lost_step:
        found.append(f"the compiled training step raises {str(m.get('training_step_error'))[:160]}")
    if recompiled:
        found.append("recompiled at " + ", ".join(f"size {size} ({plural_of(n, 'graph')}, baseline {label}: {n_was})"
                                                  for size, n, n_was in recompiled[:3]))
    cost = ("each recompile is a compile in the middle of serving or training, and past the recompile limit the model "
            "runs eagerly" if recompiled and len(found) == 1 else "the compiled model runs partly eager")
    metrics = {**m, "baseline_graph_breaks": was, "baseline_graphs_compiled": graphs_was, "new_graph_break_reasons": new_reasons}
    diff = first_graph_difference(b.get("post_grad_graphs"), m.get("post_grad_graphs"))
    if diff:
        metrics["first_graph_difference"] = diff
        found.append(f"the post-grad graphs first differ at {diff['where']}: baseline {diff['baseline']}, candidate "
                     f"{diff['candidate']}")
    if after.thresholds.get("allow_graph_breaks"):
        return replace(after, metrics=metrics, reason=f"{after.reason}; new in the candidate, allowed by the "
                                                      f"workload's allow-graph-breaks: {'; '.join(found)}")
    return replace(after, outcome=Outcome.FAILED, metrics=metrics,
                   reason=f"new in the candidate: {'; '.join(found)} ({cost}; set allow-graph-breaks: true on the "
                          f"workload to accept it)")


def _new_recompiles(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[tuple[str, int, int]]:
    """(size, graphs compiled there, the baseline's) for each dynamic size where the candidate compiled more graphs
    than the baseline did (a size the baseline did not run counts as none there)."""
    was = {s.get("size"): int(s.get("graphs") or 0) for s in before.get("dynamic_sizes") or []}
    return [(str(s.get("size")), int(s.get("graphs") or 0), was.get(s.get("size"), 0))
            for s in after.get("dynamic_sizes") or [] if int(s.get("graphs") or 0) > was.get(s.get("size"), 0)]


def first_graph_difference(before: Any, after: Any) -> dict[str, str] | None:
    """Where two sides' post-grad graphs (one line per node, as the compile check keeps them in report.json) first
    differ: graph and node, and each side's node there; None where they agree or a side kept none."""
    if not isinstance(before, list) or not isinstance(after, list) or not before:
        return None
    for g, (old, new) in enumerate(zip(before, after)):
        for n in range(max(len(old), len(new))):
            a = old[n] if n < len(old) else "(the graph ends)"
            b = new[n] if n < len(new) else "(the graph ends)"
            if a != b:
                return {"where": f"graph {g + 1}, node {n + 1}", "baseline": a, "candidate": b}
    if len(before) != len(after):
        return {"where": f"graph {min(len(before), len(after)) + 1}", "baseline": f"{len(before)} graphs",
                "candidate": f"{len(after)} graphs"}
    return None


def _cached_nothing(before: CheckResult | None, after: CheckResult) -> bool:
    """A compile-cache skipped because the candidate cached nothing (its warm process ran: `warm_cache` is there), where
    the baseline's passed: judged against the baseline's hits as a pass is."""
    return (after.aspect == "compile-cache" and after.outcome is Outcome.SKIPPED and "warm_cache" in after.metrics
            and before is not None and before.outcome is Outcome.PASSED)


def _cache_no_longer_used(before: CheckResult, after: CheckResult, label: str) -> CheckResult:
    """A candidate whose caches bypass graphs the baseline's warm process loaded from them: nothing is wrong, but
    every restart compiles cold again."""
    hits = {side: sum(int((r.metrics.get("warm_cache") or {}).get(k, 0)) for k in ("fx_hit", "aot_hit"))
            for side, r in ((Side.BASELINE, before), (Side.CANDIDATE, after))}
    if hits[Side.CANDIDATE] or not hits[Side.BASELINE]:
        return after
    return replace(after, outcome=Outcome.SUSPICIOUS,
                   reason=f"{after.reason}; baseline {label}'s warm process loaded {hits[Side.BASELINE]} cached graphs "
                          f"and entries: this torch caches none of them, so every restart compiles cold")
