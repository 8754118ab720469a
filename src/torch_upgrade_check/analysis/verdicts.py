"""Observation -> CheckResult: the pass/fail rules of every aspect, with one-line reasons (pure).

Rules (thresholds are recorded on each result):
- numerics, cross-backend, cross-version, compile, compile-mode: closeness to the fp64 CPU golden, tensor by tensor
  (analysis.closeness has the rule); cross-version's golden is the baseline's, and its own fp64 golden
  differing from the baseline's beyond float64's tolerances fails it too. compile and compile-mode (analysis.compiled)
  also fail when torch.compile compiled no graph (a model that ran eagerly compared eager with eager), does not
  compile, or raises at one of the workload's dynamic sizes; in compare also by the cross-version rule against the
  baseline's compiled outputs.
- compile-cache: a fresh process compiling from the cold compile's Inductor caches neither crashes nor gives other
  outputs (analysis.compilecache has the rule).
- sdpa-backends: every backend that runs, on every case, by the numerics rule.
- export, jit: the program built, saved and reloaded in a fresh process (in compare also the baseline's
  saved program), every output by the compile rule against eager's (analysis.artifacts).
- an aspect with a folder (aspects/<folder>/, its row's `folder`): its judge.py's rule, on its typed Metrics
  (dataloader; the training family: checkpoint, training-curve, amp; determinism, deterministic-backward; the
  distributed ones: fsdp2, ddp; warnings; the measured ones: latency, compiled-latency, memory, compile-time). A
  judge.py with `judge_within_limits` is given the team's --max-latency-ms limits too.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from torch_upgrade_check.analysis import artifacts, closeness, compilecache, compiled
from torch_upgrade_check.analysis.closeness import as_float, short
from torch_upgrade_check.aspects import ARTIFACT_ASPECTS, COMPILE_ASPECTS, part
from torch_upgrade_check.model import CheckResult, CheckSpec, Observation, Outcome, Status


def decide(spec: CheckSpec, obs: Observation, *, max_latency_ms: Mapping[str, float] | None = None, repro: str = "") -> CheckResult:
    """The rule of `spec`'s aspect, then what ran on the CPU under PYTORCH_ENABLE_MPS_FALLBACK (see on_the_cpu)."""
    return on_the_cpu(_decide(spec, obs, max_latency_ms=max_latency_ms, repro=repro))


def on_the_cpu(r: CheckResult) -> CheckResult:
    """A check on MPS whose ops fell back to the CPU (the worker's `mps_cpu_fallback_ops`, from torch's own
    fallback warnings) says which; a cross-backend check that passed so is skipped: part of what it compared
    was the CPU with itself, which cannot pass as MPS. A mismatch it found still fails."""
    ops = r.metrics.get("mps_cpu_fallback_ops") or []
    if not ops or r.outcome in (Outcome.SKIPPED, Outcome.ERROR):
        return r
    said = f"ran on the CPU (PYTORCH_ENABLE_MPS_FALLBACK=1): {', '.join(ops)}"
    if r.aspect == "cross-backend" and r.outcome is Outcome.PASSED:
        return replace(r, outcome=Outcome.SKIPPED,
                       reason=f"not an MPS result: {said}, so the comparison with the CPU is partly the CPU with "
                              "itself; unset PYTORCH_ENABLE_MPS_FALLBACK to compare MPS's kernels (an op MPS lacks "
                              "then raises, naming it)")
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
    if judge is not None:  # the aspect's own rule, on its typed metrics (and the team's latency limits, if it asks)
        limited = getattr(judge, "judge_within_limits", None)
        typed = judge.Metrics.from_dict(m)
        outcome, reason, thresholds, derived = (limited(typed, spec, max_latency_ms or {}) if limited is not None
                                                else judge.judge(typed, spec))
        m.update(derived)
    elif spec.aspect in ("numerics", "cross-backend", "cross-version"):
        outcome, reason, thresholds = closeness.judge(m, spec.aspect, spec.dtype)
        changed = closeness.fp64_change(m) if spec.aspect == "cross-version" else ""
        if changed:
            reason = f"{changed}; {reason}" if outcome is Outcome.PASSED else f"{reason}; {changed}"
            outcome = Outcome.FAILED
    elif spec.aspect in COMPILE_ASPECTS:
        outcome, reason, thresholds = compiled.judge(m, spec.dtype,
                                                     allow_graph_breaks=bool(spec.params.get("allow_graph_breaks")))
    elif spec.aspect == "compile-cache":
        outcome, reason, thresholds = compilecache.judge(m)
    elif spec.aspect in ARTIFACT_ASPECTS:
        outcome, reason, thresholds = artifacts.judge(m, spec.aspect, spec.dtype)
    elif spec.aspect == "sdpa-backends":
        outcome, reason, thresholds = _sdpa_backends(m, spec.dtype)
    else:
        return CheckResult(outcome=Outcome.ERROR, reason=f"no rule for aspect {spec.aspect!r}", metrics=m, **base)
    own = getattr(judge, "details", None)  # an aspect whose details are its own (its judge.py says)
    details = own(judge.Metrics.from_dict(m)) if own is not None else _mismatch_details(m)
    if not details and isinstance(m.get("vs_baseline"), Mapping):  # fsdp2, ddp: the steps unlike the baseline's
        details = _mismatch_details(m["vs_baseline"])
    if spec.aspect == "compile-cache":  # the warm process's own words: its traceback, or its output's last lines
        details = str(m.get("warm_traceback") or m.get("warm_tail") or "")
    return CheckResult(outcome=outcome, reason=reason, metrics=m, thresholds=thresholds, details=details, **base)


def _sdpa_backends(m: dict[str, Any], dtype: str) -> tuple[Outcome, str, dict[str, Any]]:
    """Each backend on each case by the numerics rule; any wrong one fails, named with its case."""
    checked, thresholds = m.get("checked") or {}, {}
    wrong = []
    for key, sub in checked.items():
        outcome, why, thresholds = closeness.judge({**sub, "rtol": m.get("rtol"), "atol": m.get("atol")}, "numerics", dtype)
        if outcome is not Outcome.PASSED:
            wrong.append(f"{key}: {why}")
    backends = sorted({key.split("/")[0] for key in checked})
    absent = sorted({key.split("/")[0] for key in m.get("not_offered") or {}} - set(backends))
    partly = sorted({key.split("/")[0] for key in m.get("not_offered") or {}} & set(backends))
    defaults = ", ".join(f"{case}: {name}" for case, name in (m.get("default_backend") or {}).items())
    where = (f"; not offered here: {', '.join(absent)}" if absent else "") + (
        f"; not for every case: {', '.join(partly)}" if partly else "") + (f"; the default picks {defaults}" if defaults else "") + (
        f" ({m['default_note']})" if m.get("default_note") else "")
    if not checked:
        return Outcome.FAILED, f"no SDPA backend ran{where}", thresholds
    if wrong:
        return (Outcome.FAILED, f"{len(wrong)} of {len(checked)} backend cases differ from the fp64 golden; first: "
                                f"{wrong[0]}{where}", thresholds)
    return Outcome.PASSED, (f"{', '.join(backends)} within tolerance on {len(m.get('cases') or {})} cases, forward and "
                            f"backward{where}"), thresholds




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
