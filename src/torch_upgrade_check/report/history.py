"""History -> the job summary's Markdown, the --json document and the alarm's GitHub outputs (pure)."""

from __future__ import annotations

from typing import Any

from torch_upgrade_check.analysis.trends import Finding, History, Point, summary_lines
from torch_upgrade_check.report.markdown import md as escape_md

JSON_KIND = "torch-upgrade-check/history-findings"
JSON_VERSION = 1


def render_markdown(history: History, charts: dict[str, str], *, charts_missing: str = "") -> str:
    """A heading, one line per finding (a step, a first failure, a flaky or host-only check) and its chart's link."""
    out = [f"### History: {escape_md(history.runner or 'no runs yet')}", "",
           f"{history.runs} run(s) of this runner in the history."]
    if history.build:
        out += ["", escape_md(history.build[0].upper() + history.build[1:]) + "."]
    lines = summary_lines(history)
    if not lines:
        out += ["", "No check changed: no step, no new failure."]
    for line in lines:
        out += ["", f"- {escape_md(line)}"]
    pictures = [(f.check, charts[f.check]) for f in history.findings if f.check in charts]
    for check, name in pictures:
        out += ["", f"[![{escape_md(check)}]({name})]({name})"]
    if charts_missing:
        out += ["", f"_{escape_md(charts_missing)}_"]
    return "\n".join(out) + "\n"


def _point(p: Point | None) -> dict[str, Any] | None:
    return None if p is None else {"run": p.run, "when": p.when, "build": p.build, "version": p.version,
                                   "outcome": p.outcome, "ratio": p.ratio}


def _finding(f: Finding) -> dict[str, Any]:
    return {"check": f.check, "kind": f.kind, "alarms": f.alarms, "line": f.line, "last_good": _point(f.last_good),
            "first_bad": _point(f.first_bad), "factor": f.step.factor if f.step else None}


def to_document(history: History, problems: list[str]) -> dict[str, Any]:
    alarm = history.alarm
    return {"kind": JSON_KIND, "schema_version": JSON_VERSION, "runner": history.runner, "runs": history.runs,
            "alarm": alarm is not None, "base_flip_rate": history.base_flip_rate, "notes": history.notes,
            "build": history.build,
            "findings": [_finding(f) for f in history.findings], "problems": problems}


def alarm_outputs(history: History) -> dict[str, str]:
    """alarm, last-good, first-bad: the torch versions a bisection runs between ("" where there is none)."""
    alarm = history.alarm
    if alarm is None:
        return {"alarm": "false", "last-good": "", "first-bad": ""}
    return {"alarm": "true", "last-good": alarm.last_good.version if alarm.last_good else "",
            "first-bad": alarm.first_bad.version if alarm.first_bad else ""}
