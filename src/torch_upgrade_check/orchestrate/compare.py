"""Baseline vs candidate torch on one machine in one job: same checks, cross-version numerics, and
latency and memory measured in interleaved rounds so that machine drift hits both equally."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from torch_upgrade_check.analysis import ab, stats
from torch_upgrade_check.analysis.verdicts import decide, format_bytes, format_ms, latency_limit
from torch_upgrade_check.model import CheckResult, CheckSpec, Observation, Outcome, Report
from torch_upgrade_check.orchestrate import session
from torch_upgrade_check.orchestrate.live import LiveWorker

AB_ASPECTS = ("latency", "memory")
ROUNDS = 12  # interleaved rounds per batch (ABBA order), SAMPLES each side per round
SAMPLES = 3
EXTRA_BATCHES = 2  # more batches for a check whose first batch was suspicious, before settling on it
WARMUP_ROUNDS = 1  # per batch, discarded: the first requests to a fresh worker are the noisiest
MEMORY_ROUNDS = 3


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


def cross_version_specs(settings: session.Settings, device: str, store: Path, mode: str) -> list[CheckSpec]:
    """One cross-version check per workload and dtype: every built-in with numerics, and the user's
    workloads that list cross-version among their aspects (the default)."""
    wanted = {w.name for w in settings.workloads if "cross-version" in w.aspects or (not w.factory and "numerics" in w.aspects)}
    specs = []
    for s in session.plan(settings, device, aspects=["numerics", "cross-version"]):
        spec = CheckSpec(s.workload, "cross-version", device, s.dtype, s.factory,
                         {**s.params, "mode": mode, "store": str(store)})
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


def measure_ab(
    specs: Sequence[CheckSpec],
    baseline: LiveWorker,
    candidate: LiveWorker,
    settings: session.Settings,
    thresholds: Thresholds,
    say: Callable[[str], None],
    on_result: Callable[[CheckResult, CheckResult], None],
) -> None:
    """Latency and memory, A/B in interleaved rounds; each check's (baseline, candidate) results go to `on_result`."""
    for i, spec in enumerate(specs, 1):
        rounds = ROUNDS if spec.aspect == "latency" else MEMORY_ROUNDS
        samples = SAMPLES if spec.aspect == "latency" else 1
        threshold = thresholds.latency if spec.aspect == "latency" else thresholds.memory
        batch = _interleave(spec, baseline, candidate, rounds, samples, settings.timeout_s)
        if isinstance(batch, tuple) and isinstance(batch[0], Observation):
            b_obs, c_obs = batch
            on_result(decide(spec, b_obs, max_latency_ms=settings.max_latency_ms),
                      decide(spec, c_obs, max_latency_ms=settings.max_latency_ms))
            say(f"[{i}/{len(specs)}] A/B {spec.id}: error: {(b_obs if b_obs.status != 'ok' else c_obs).message}")
            continue
        b_rounds, c_rounds, b_metrics, c_metrics, seconds = batch
        change = ab.classify(b_rounds, c_rounds, threshold)
        for _ in range(EXTRA_BATCHES):
            if change.state != "suspicious":
                break
            # not clear yet: measure more rounds rather than warn on noise
            more = _interleave(spec, baseline, candidate, rounds, samples, settings.timeout_s)
            if isinstance(more[0], Observation):
                break
            b_rounds, c_rounds, seconds = [*b_rounds, *more[0]], [*c_rounds, *more[1]], seconds + more[4]
            change = ab.classify(b_rounds, c_rounds, threshold)
        confirmed = False
        if change.state == "regression":
            again = _interleave(spec, baseline, candidate, rounds, samples, settings.timeout_s)
            if not isinstance(again[0], Observation):
                confirmed = ab.confirms(again[0], again[1], threshold)
                b_rounds, c_rounds = [*b_rounds, *again[0]], [*c_rounds, *again[1]]
                seconds += again[4]
                combined = ab.classify(b_rounds, c_rounds, threshold)
                confirmed = confirmed and combined.state == "regression"
                change = replace(combined, state="regression" if confirmed else "suspicious")
            else:
                change = replace(change, state="suspicious")
        base, cand = _ab_results(
            spec, [x for r in b_rounds for x in r], [x for r in c_rounds for x in r], b_metrics, c_metrics,
            change, confirmed, threshold, settings, seconds)
        on_result(base, cand)
        say(f"[{i}/{len(specs)}] A/B {cand.outcome.value.upper():<10} {spec.id:<44} {cand.reason[:110]}")


def _interleave(spec: CheckSpec, baseline: LiveWorker, candidate: LiveWorker, rounds: int, samples: int,
                timeout_s: float):
    """ABBA-ordered rounds: a linear drift in the machine's speed cancels out between the sides.

    Returns each side's samples per round (so rounds can be paired), or the two sides' observations
    when one of them failed.
    """
    req = replace(spec, params={**spec.params, "samples": samples})
    values: dict[str, list[list[float]]] = {"b": [], "c": []}
    last: dict[str, Observation] = {}
    seconds = 0.0
    for r in range(-WARMUP_ROUNDS, rounds):
        order = (("b", baseline), ("c", candidate)) if r % 2 == 0 else (("c", candidate), ("b", baseline))
        for side, worker in order:
            obs = worker.request(req, timeout_s)
            seconds += obs.duration_s
            if obs.status != "ok":
                failed = Observation(spec.id, obs.status, message=obs.message, traceback=obs.traceback,
                                     duration_s=obs.duration_s)
                other = last.get("c" if side == "b" else "b") or Observation(spec.id, "skipped",
                                                                              message="the other side failed first")
                return (failed, other) if side == "b" else (other, failed)
            last[side] = obs
            if r < 0:
                continue  # a warm-up round: caches, allocator and thread pools settle; not evidence
            if spec.aspect == "latency":
                values[side].append([float(x) for x in obs.metrics.get("samples_ms", [])])
            else:
                values[side].append([float(obs.metrics.get("peak_bytes", 0))])
    return values["b"], values["c"], last["b"].metrics, last["c"].metrics, seconds


def _ab_results(spec: CheckSpec, b_vals: list[float], c_vals: list[float], b_metrics: dict, c_metrics: dict,
                change: ab.Change, confirmed: bool, threshold: float, settings: session.Settings,
                seconds: float) -> tuple[CheckResult, CheckResult]:
    common = {"workload": spec.workload, "aspect": spec.aspect, "device": spec.device, "dtype": spec.dtype}
    ab_metrics = {**change.metrics(), "confirmed": confirmed, "threshold": threshold}
    if spec.aspect == "latency":
        base_m = {**b_metrics, "samples_ms": b_vals}
        base = decide(spec, Observation(spec.id, "ok", base_m, duration_s=seconds / 2),
                      max_latency_ms=settings.max_latency_ms)
        cand_m = {**c_metrics, "samples_ms": c_vals, "baseline_samples_ms": b_vals,
                  "median_ms": stats.median(c_vals), "iqr_ms": stats.iqr(c_vals), **ab_metrics}
        medians = f"{format_ms(change.baseline_median)} → {format_ms(change.candidate_median)}"
        what = f"{_fmt_ratio(change)} of baseline latency ({medians})"
        limit = latency_limit(spec, settings.max_latency_ms)
        thresholds = {"max_latency_regression": threshold, **({"max_latency_ms": limit} if limit else {})}
        over_limit = limit is not None and stats.median(c_vals) > limit
    else:
        base = CheckResult(**common, outcome=Outcome.PASSED, metrics={**b_metrics, "peak_bytes": stats.median(b_vals)},
                           reason=f"peak {format_bytes(stats.median(b_vals))}", duration_s=seconds / 2)
        cand_m = {**c_metrics, "peak_bytes": stats.median(c_vals), "baseline_peak_bytes": stats.median(b_vals),
                  **ab_metrics}
        peaks = f"{format_bytes(change.baseline_median)} → {format_bytes(change.candidate_median)}"
        what = f"{_fmt_ratio(change)} of baseline peak memory ({peaks})"
        thresholds = {"max_memory_regression": threshold}
        over_limit = False
    state = change.state
    outcome = {"regression": Outcome.FAILED, "suspicious": Outcome.SUSPICIOUS}.get(state, Outcome.PASSED)
    reason = f"{state}: {what}"
    if state == "regression":
        reason += (f", beyond {threshold:.0%}, p={change.p_value:.2g} over {change.rounds} paired rounds, "
                   "confirmed by a second batch")
    elif state == "suspicious":
        reason += f", beyond {threshold:.0%} but not confirmed (p={change.p_value:.2g})" if change.ratio > 1 + threshold \
            else ", too noisy to tell"
    if over_limit:
        outcome, reason = Outcome.FAILED, f"{reason}; median over the --max-latency-ms limit {thresholds['max_latency_ms']:g} ms"
    cand = CheckResult(**common, outcome=outcome, reason=reason, metrics=cand_m, thresholds=thresholds,
                       duration_s=seconds / 2)
    return base, cand


def _fmt_ratio(change: ab.Change) -> str:
    if math.isnan(change.ratio):
        return "n/a"
    return f"{change.ratio:.2f}× (95% CI {change.ci_low:.2f}–{change.ci_high:.2f})"


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
