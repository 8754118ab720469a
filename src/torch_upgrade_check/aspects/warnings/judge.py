"""The warnings aspect's typed metrics and rule (pure): a workload's warnings are listed and the check passes; in
compare the candidate's are judged by what is new since the baseline (suspicious, or failed when --fail-on names
warnings), a warning torch raises once a process counting as new only when no workload raised it on the baseline."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from torch_upgrade_check.analysis.closeness import plural_of
from torch_upgrade_check.aspects import ASPECT
from torch_upgrade_check.aspects._metrics import Judged, Recorded
from torch_upgrade_check.model import CheckResult, CheckSpec, Outcome, Report, Side

NAME = "warnings"
# its failures count only where --fail-on names its kind (not by default): its repro command then repeats --fail-on as
# typed (commands.argv.repro_command)
REPRO_FAIL_ON = True


@dataclass(frozen=True)
class Metrics(Recorded):
    """The warnings check's metrics (worker: aspects.warnings.run; compare adds what changed since the baseline)."""

    warnings: Sequence[Mapping[str, Any]] | None = None  # category, module, message, count, aspects
    new_warnings: Sequence[Mapping[str, Any]] | None = None
    gone_warnings: Sequence[Mapping[str, Any]] | None = None
    baseline_warnings: int | None = None


def judge(m: Metrics, spec: CheckSpec | None = None) -> Judged:
    """Listed; passes (compare judges what is new in the candidate: judge_in_compare)."""
    return Judged(Outcome.PASSED, warnings_reason(list(m.warnings or [])), {})


def details(m: Metrics) -> str:
    """The check's details: a line a warning, with how often and during which aspects it was raised."""
    return warnings_details(list(m.warnings or []))


def judge_in_compare(before: CheckResult, after: CheckResult, baseline: Report, candidate: Report,
                     fail_on: Collection[str]) -> CheckResult:
    """The candidate's warnings check, both sides' passed: the warnings new since the baseline, and those gone."""
    raised = {side: {_key(w) for r in report.results if r.aspect == NAME for w in r.metrics.get("warnings") or []}
              for side, report in ((Side.BASELINE, baseline), (Side.CANDIDATE, candidate))}
    failing = str(ASPECT[NAME].kind) in fail_on
    label = baseline.label
    old = {_key(w): w for w in Metrics.from_dict(before.metrics).warnings or []}
    now = {_key(w): w for w in Metrics.from_dict(after.metrics).warnings or []}
    new = [w for k, w in now.items() if k not in raised[Side.BASELINE]]
    gone = [w for k, w in old.items() if k not in raised[Side.CANDIDATE]]
    metrics = {**after.metrics, "new_warnings": new, "gone_warnings": gone, "baseline_warnings": len(old)}
    listed = "\n".join([*(f"new: {warning_entry(w)}" for w in new), *(f"gone: {warning_line(w)}" for w in gone)])
    gone_text = f"; {plural_of(len(gone), 'warning')} of baseline {label} gone" if gone else ""
    if not new:
        counts = (f"{plural_of(len(now), 'warning')} on both" if len(now) == len(old) else
                  f"{plural_of(len(now), 'warning')} here, {len(old)} on the baseline")
        reason = f"no new warnings since baseline {label} ({counts}){gone_text}"
        return replace(after, reason=reason, metrics=metrics, details=listed or after.details)
    outcome = Outcome.FAILED if failing else Outcome.SUSPICIOUS
    how = "fail-on includes warnings" if failing else "add warnings to fail-on to fail on them"
    reason = f"{warnings_reason(new, 'new ')} in the candidate, not on baseline {label}{gone_text} ({how})"
    return replace(after, outcome=outcome, reason=reason, metrics=metrics, details=listed,
                   thresholds={**after.thresholds, "fail_on_warnings": failing})


def _key(w: Mapping[str, Any]) -> tuple[str, str, str]:
    """A warning's identity: its category, module and message (its count and aspects are not)."""
    return str(w.get("category")), str(w.get("module")), str(w.get("message"))


def warning_line(w: Mapping[str, Any]) -> str:
    """`FutureWarning from torch.serialization: "You are using torch.load with…"`"""
    return f"{w.get('category', '?')} from {w.get('module', '?')}: \"{w.get('message', '')}\""


def warnings_reason(found: Sequence[Mapping[str, Any]], what: str = "") -> str:
    """`2 warnings (FutureWarning, UserWarning); first: …` or `no warnings`."""
    if not found:
        return f"no {what}warnings"
    kinds = sorted({str(w.get("category")) for w in found})
    return (f"{plural_of(len(found), what + 'warning')} ({', '.join(kinds)}); first: {warning_line(found[0])}")


def warning_entry(w: Mapping[str, Any]) -> str:
    """A warning's line with how often it was raised and by which aspects: a row of a check's details."""
    return f"{warning_line(w)} ×{w.get('count', 1)} (during {', '.join(w.get('aspects') or ['?'])})"


def warnings_details(found: Sequence[Mapping[str, Any]]) -> str:
    """Every warning's entry, a line each."""
    return "\n".join(warning_entry(w) for w in found)
