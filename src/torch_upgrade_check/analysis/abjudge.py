"""One A/B check measured in fresh process pairs -> both sides' results: the outcome rules and the one-line reason a
reviewer reads (pure; orchestrate.measure measures the pairs)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

from torch_upgrade_check.analysis import ab, hostbusy, stats
from torch_upgrade_check.analysis import attribution as attributed
from torch_upgrade_check.analysis.verdicts import decide, format_bytes, format_ms, latency_limit
from torch_upgrade_check.aspects import LATENCY_LIKE, TIMED, ab_of
from torch_upgrade_check.model import ABState, CheckResult, CheckSpec, Observation, Outcome

UNDECIDED = ("fail", "pass")  # what an undecided check whose estimate is beyond the threshold does (default first)
MEMORY_FLOOR_BYTES = 64 * 1024  # peak-memory changes are judged on (bytes + floor): 0 -> 0 is no change
# host RAM (resident set) growth is page- and allocator-grained: a few MiB of noise must not read as growth
HOST_FLOOR_BYTES = 32 * 2**20
TIMED_WORDS = tuple(ab_of(a).words for a in TIMED)


class Measured(Protocol):
    """What `results` reads of one A/B check's pairs (orchestrate.measure.Track): both sides' samples and metrics
    ("b", "c"), the decisions, and the budget it was measured within."""

    spec: CheckSpec
    threshold: float
    inner: int
    batches: list[ab.Batch]
    samples: dict[str, list[float]]
    metrics: dict[str, dict]
    decision: ab.Decision | None
    failed: tuple[Observation, Observation] | None
    host_samples: dict[str, list[float]]
    host_decision: ab.Decision | None
    compile_seconds: float
    @property
    def busy_shares(self) -> list[float | None]: ...  # per pair: the pinned CPUs' share others used (timed aspects)

    @property
    def counts_warm(self) -> bool: ...

    @property
    def seconds(self) -> float: ...

    @property
    def budget(self) -> float: ...


def outcome_of(d: ab.Decision, undecided: str = UNDECIDED[0]) -> Outcome:
    """What a final A/B decision makes of its check: a `regression` fails; an `undecided` one fails when its estimate
    is beyond the threshold and significant at the run's confidence (ab.Decision.beyond) and `undecided` is "fail"
    (the default), else warns; the rest pass."""
    if d.state == ABState.REGRESSION or (d.state == ABState.UNDECIDED and d.beyond and undecided == "fail"):
        return Outcome.FAILED
    return Outcome.SUSPICIOUS if d.state == ABState.UNDECIDED else Outcome.PASSED


def results(t: Measured, max_latency_ms: dict[str, float], undecided: str = UNDECIDED[0],
            attribution: dict | None = None) -> tuple[CheckResult, CheckResult]:
    """The baseline's and the candidate's results of one A/B check. An `undecided` check fails when its point
    estimate is beyond the threshold and significant at the run's confidence (ab.Decision.beyond) and `undecided`
    is "fail" (the default); otherwise it warns. `attribution` (orchestrate.attribute's table of where a slower
    forward's time went) is kept in the candidate's metrics and its top op leads the reason after the medians."""
    spec = t.spec
    if t.failed is not None:
        return (decide(spec, t.failed[0], max_latency_ms=max_latency_ms),
                decide(spec, t.failed[1], max_latency_ms=max_latency_ms))
    d = t.decision
    assert d is not None
    common = {"workload": spec.workload, "aspect": spec.aspect, "device": spec.device, "dtype": spec.dtype}
    ab_metrics = {**d.metrics(), "threshold": t.threshold, "inner_loops": t.inner or None,
                  "batch_seconds": [round(b.seconds + (b.warm_seconds if t.counts_warm else 0.0), 3) for b in t.batches],
                  "warm_up_seconds": [round(b.warm_seconds, 3) for b in t.batches],
                  **({"compile_seconds": round(t.compile_seconds, 3)} if t.compile_seconds else {}),
                  "budget_s": t.budget, "undecided_policy": undecided,
                  **hostbusy.words(t.busy_shares)}
    b_vals, c_vals = t.samples["b"], t.samples["c"]
    if spec.aspect in TIMED:
        base = decide(spec, Observation(spec.id, "ok", {**t.metrics["b"], "samples_ms": b_vals},
                                        duration_s=t.seconds / 2), max_latency_ms=max_latency_ms)
        cand_m = {**t.metrics["c"], "samples_ms": c_vals, "baseline_samples_ms": b_vals,
                  "median_ms": stats.median(c_vals), "iqr_ms": stats.iqr(c_vals), **ab_metrics}
        limit = latency_limit(spec, max_latency_ms) if spec.aspect in LATENCY_LIKE else None
        key = "max_latency_regression" if spec.aspect in LATENCY_LIKE else "max_compile_time_regression"
        thresholds = {key: t.threshold, **({"max_latency_ms": limit} if limit else {})}
        over_limit = limit is not None and stats.median(c_vals) > limit
        fmt = format_ms
    else:
        base = CheckResult(**common, outcome=Outcome.PASSED, metrics={**t.metrics["b"], "peak_bytes": stats.median(b_vals)},
                           reason=f"peak {format_bytes(stats.median(b_vals))}", duration_s=t.seconds / 2)
        cand_m = {**t.metrics["c"], "peak_bytes": stats.median(c_vals), "baseline_peak_bytes": stats.median(b_vals),
                  **ab_metrics}
        thresholds = {"max_memory_regression": t.threshold, "floor_bytes": MEMORY_FLOOR_BYTES}
        over_limit = False
        fmt = format_bytes
    outcome = outcome_of(d, undecided)
    if attribution is not None:
        cand_m["op_attribution"] = attribution
    reason = explain(d, t.threshold, fmt, ab_of(spec.aspect).words, budget_s=t.budget, undecided=undecided,
                     lead=attributed.lead(attribution) if attribution is not None else "")
    h = t.host_decision
    if h is not None:  # memory: host RAM judged alike; the worse of the two decides
        hb, hc = t.host_samples["b"], t.host_samples["c"]
        base = replace(base, metrics={**base.metrics, "host_peak_bytes": stats.median(hb)})
        cand_m.update({"host_peak_bytes": stats.median(hc), "baseline_host_peak_bytes": stats.median(hb),
                       "host_samples_bytes": hc, "baseline_host_samples_bytes": hb,
                       "host": {**h.metrics(), "floor_bytes": HOST_FLOOR_BYTES}})
        host_outcome = outcome_of(h, undecided)
        host_reason = explain(h, t.threshold, fmt, "host RAM (peak resident set growth)", budget_s=t.budget,
                              undecided=undecided)
        order = (Outcome.PASSED, Outcome.SUSPICIOUS, Outcome.FAILED)
        if order.index(host_outcome) > order.index(outcome):
            # the host series decides: the state and the numbers beside it (ratio, intervals, medians, pairs) are all
            # the host's, so a reader never sees a host `regression` next to the device's 1.00x; the device's apart
            cand_m.update({**h.metrics(), "decided_by": "host", "device": d.metrics()})
            outcome, reason = host_outcome, f"{host_reason}; device {reason}"
        else:
            cand_m["decided_by"] = "device"
            reason = f"{reason}; {host_reason}"
    if over_limit:
        outcome, reason = Outcome.FAILED, f"{reason}; median over the --max-latency-ms limit {thresholds['max_latency_ms']:g} ms"
    cand = CheckResult(**common, outcome=outcome, reason=reason, metrics=cand_m, thresholds=thresholds,
                       duration_s=t.seconds / 2)
    return base, cand


def explain(d: ab.Decision, threshold: float, fmt: Callable[[float], str], what: str, *, budget_s: float = math.nan,
            undecided: str = UNDECIDED[0], lead: str = "") -> str:
    """One line a reviewer understands: "regression: latency 1.14× slower (95% CI 1.09–1.19), confirmed in 3 of 3
    fresh process pairs; threshold 1.10×". A significant change that the threshold rules out as a
    regression reads "slower, within the 10% threshold" (or faster), not "unchanged": the JSON keeps the
    state for gating, the words say what was measured. `lead` (the op a slower forward's time went to) follows the
    medians: the state and the size stay first, where every reader and test of the reason looks for them, and the op
    comes before the statistics, within the table cell's first 160 characters."""
    if math.isnan(d.ratio):
        return f"{d.state}: {d.why}"
    up, down = ("slower", "faster") if what in TIMED_WORDS else ("more", "less")
    if round(d.ratio, 2) == 1.0:
        size = "the same" if d.ci_low == d.ci_high else "1.00×"
    elif d.ratio > 1:
        size = f"{d.ratio:.2f}× {up}"
    else:
        size = f"{1 / d.ratio:.2f}× {down}"
    state = d.state
    if state == ABState.UNCHANGED and d.significant:
        state = f"{up if d.ratio > 1 else down}, within the {threshold:.0%} threshold"
    interval = "" if d.ci_low == d.ci_high else f" (95% CI {d.ci_low:.2f}–{d.ci_high:.2f})"
    medians = f"{fmt(d.baseline_median)} → {fmt(d.candidate_median)}"
    more = ""
    if d.state == ABState.UNDECIDED:
        if d.more_pairs < 0:
            more = "; it sits on the threshold: no budget would decide it"
        elif math.isfinite(budget_s):
            budget = f"{budget_s:.0f}" if budget_s >= 10 else f"{budget_s:.2g}"  # a sized budget is not 75.7358 s
            more = (f"; deciding would take about {d.more_pairs} more process pair{'s' if d.more_pairs != 1 else ''}, "
                    f"~{d.more_seconds:.0f} s of measuring beyond its {budget} s budget (raise ab-budget: the input, "
                    f"the config key or --ab-budget)")
        if d.ratio > 1 + threshold and not d.beyond:
            more += "; warns: its estimate is beyond the threshold but not significant at the run's confidence"
        if d.beyond:
            more += ("; fails: its estimate is beyond the threshold and significant at the run's confidence "
                     "(undecided: pass lets it pass)"
                     if undecided == "fail" else
                     "; passes under --undecided pass though its estimate is beyond the threshold and significant "
                     "at the run's confidence")
    medians += f"; {lead}" if lead else ""
    return (f"{state}: {what} {size}{interval}, {medians}; {d.why}; threshold {1 + threshold:.2f}×, "
            f"{d.rounds} rounds in {d.batches} process pair{'s' if d.batches != 1 else ''}{more}")
