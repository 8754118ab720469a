"""The sdpa-backends aspect's typed metrics and rule (pure): each backend on each case by the numerics rule
(analysis.closeness); any wrong one fails, named with its case. In compare a default backend that changed since the
baseline is said, not judged (`judge_in_compare`): a backend that is wrong fails on its own."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from torch_upgrade_check.analysis import closeness
from torch_upgrade_check.aspects._metrics import Judged, Recorded
from torch_upgrade_check.model import CheckResult, CheckSpec, Outcome, Report


@dataclass(frozen=True)
class Metrics(Recorded):
    """The sdpa-backends check's metrics (worker: aspects.sdpa_backends.run): per "BACKEND/case", a comparison with
    the fp64 golden (worker: tensors.compare); what was not offered, and the backend the default picks per case."""

    cases: Mapping[str, Mapping[str, Any]] | None = None
    checked: Mapping[str, Mapping[str, Any]] | None = None
    not_offered: Mapping[str, str] | None = None
    default_backend: Mapping[str, str] | None = None
    default_note: str | None = None
    rtol: float | None = None
    atol: float | None = None
    default_backend_changed: Mapping[str, Sequence[str]] | None = None  # compare: case -> [baseline's, candidate's]


def judge(m: Metrics, spec: CheckSpec) -> Judged:
    """Each backend on each case by the numerics rule; any wrong one fails, named with its case."""
    checked, thresholds = m.checked or {}, {}
    wrong = []
    for key, sub in checked.items():
        outcome, why, thresholds = closeness.judge({**sub, "rtol": m.rtol, "atol": m.atol}, "numerics", spec.dtype)
        if outcome is not Outcome.PASSED:
            wrong.append(f"{key}: {why}")
    backends = sorted({key.split("/")[0] for key in checked})
    offered = {key.split("/")[0] for key in m.not_offered or {}}
    absent, partly = sorted(offered - set(backends)), sorted(offered & set(backends))
    defaults = ", ".join(f"{case}: {name}" for case, name in (m.default_backend or {}).items())
    where = (f"; not offered here: {', '.join(absent)}" if absent else "") + (
        f"; not for every case: {', '.join(partly)}" if partly else "") + (
        f"; the default picks {defaults}" if defaults else "") + (f" ({m.default_note})" if m.default_note else "")
    if not checked:
        return Judged(Outcome.FAILED, f"no SDPA backend ran{where}", thresholds)
    if wrong:
        return Judged(Outcome.FAILED, f"{len(wrong)} of {len(checked)} backend cases differ from the fp64 golden; "
                                      f"first: {wrong[0]}{where}", thresholds)
    return Judged(Outcome.PASSED, f"{', '.join(backends)} within tolerance on {len(m.cases or {})} cases, forward "
                                  f"and backward{where}", thresholds)


def judge_in_compare(before: CheckResult, after: CheckResult, baseline: Report, candidate: Report,
                     fail_on: Collection[str]) -> CheckResult:
    """Both sides' checks passed: the backend the default dispatch picks, per case, where it changed since the
    baseline, said in the reason and kept as `default_backend_changed`."""
    old = Metrics.from_dict(before.metrics).default_backend or {}
    now = Metrics.from_dict(after.metrics).default_backend or {}
    changed = {case: (old[case], name) for case, name in now.items() if case in old and old[case] != name}
    if not changed:
        return after
    text = ", ".join(f"{case}: {was} → {name}" for case, (was, name) in changed.items())
    return replace(after, reason=f"{after.reason}; the default backend changed since baseline {baseline.label}: {text}",
                   metrics={**after.metrics, "default_backend_changed": {k: list(v) for k, v in changed.items()}})
