"""A bisection -> its Markdown summary, JUnit XML (junit-10.xsd) and the action's outputs (pure)."""

from __future__ import annotations

from junitparser import Error, Failure, JUnitXml, Skipped, TestCase, TestSuite

from torch_upgrade_check.model import Bisection, BisectStep
from torch_upgrade_check.report import clip, one_line
from torch_upgrade_check.report.junit import NAME, junit_to_string, xml_message, xml_text
from torch_upgrade_check.report.markdown import md, row_line, table_header

ICON = {"good": "✅", "bad": "❌", "skip": "⏭️"}
HEADLINE = {
    "found": "first bad build found",
    "range": "narrowed to a range (builds between could not be judged)",
    "not-reproduced": "nothing to bisect: the bad build does not fail",
    "error": "could not bisect",
    "running": "stopped before it finished",
}


def verdict(b: Bisection) -> str:
    """passed: the search ended (found or a range); error: it could not; failed is never used (the
    regression itself is compare's to report)."""
    return "passed" if b.outcome in ("found", "range") else "error"


def render_summary(b: Bisection) -> str:
    lines = [f"## torch-upgrade-check bisect: {HEADLINE.get(b.outcome, b.outcome)}", ""]
    if b.outcome in ("found", "range"):
        good, bad = _step(b, b.last_good), _step(b, b.first_bad)
        lines += [
            f"**Last good:** `{b.last_good}`{_when(good)} · **first bad:** `{b.first_bad}`{_when(bad)}",
            "",
        ]
        if b.skipped_between:
            lines += [f"Between them, {len(b.skipped_between)} build(s) could not be judged: "
                      + ", ".join(f"`{s}`" for s in b.skipped_between), ""]
        if b.compare_url:
            lines += [f"Commits between them: [{_short(good)}…{_short(bad)}]({b.compare_url})", ""]
        if bad is not None and bad.reason:
            lines += [f"Why `{b.first_bad}` is bad: {md(bad.reason)}", ""]
    elif b.reason:
        lines += [md(b.reason), ""]
    lines += [
        f"{len(b.builds)} builds from `{b.builds[0]}` to `{b.builds[-1]}`, {len(b.steps)} judged "
        f"({b.installs} of them versions installed or reused from the venv store), "
        f"checks: {', '.join(f'`{c}`' for c in b.checks) or 'all'}, on {b.device or '?'}.",
        "",
        table_header(["#", "build", "verdict", "why", "time"]).rstrip("\n"),
    ]
    for s in sorted(b.steps, key=lambda s: s.index):
        lines.append(row_line([str(s.index), f"`{s.build}`{_when(s)}", f"{ICON.get(s.verdict, '')} {s.verdict}",
                               _cell(s.reason), f"{s.seconds:.0f} s"]).rstrip("\n"))
    return "\n".join(lines) + "\n"


def build_junit(b: Bisection) -> JUnitXml:
    """One suite, one case per build judged: good passes, bad is a <failure> (it is what the search looked
    for), skip is <skipped>; a bisection that could not run at all adds one `bisect` <error> case."""
    xml = JUnitXml(name=f"{NAME} bisect")
    suite = TestSuite(f"{NAME} bisect")
    for s in sorted(b.steps, key=lambda s: s.index):
        case = TestCase(f"{s.index:02d} {s.build}", classname=f"{NAME}.bisect", time=round(s.seconds, 3))
        reason = xml_message(s.reason)
        if s.verdict == "bad":
            case.result = [Failure(reason, "bad-build")]
        elif s.verdict == "skip":
            case.result = [Skipped(reason, "skipped-build")]
        case.system_out = xml_text(s.reason or s.verdict)
        suite.append(case)
    if b.outcome not in ("found", "range"):
        case = TestCase("bisect", classname=f"{NAME}.bisect")
        case.result = [Error(xml_message(b.reason or b.outcome), b.outcome)]
        suite.append(case)
    suite.update_statistics()
    xml.append(suite)
    xml.tests, xml.failures, xml.errors = suite.tests, suite.failures, suite.errors
    xml.time = round(sum(s.seconds for s in b.steps), 3)
    return xml


def junit_text(b: Bisection) -> str:
    return junit_to_string(build_junit(b))


def outputs(b: Bisection, paths: dict[str, str]) -> dict[str, str]:
    return {
        "verdict": verdict(b),
        "bisect-outcome": b.outcome,
        "last-good": b.last_good,
        "first-bad": b.first_bad,
        "compare-url": b.compare_url,
        **paths,
    }


def _step(b: Bisection, build: str) -> BisectStep | None:
    return next((s for s in b.steps if s.build == build), None)


def _when(s: BisectStep | None) -> str:
    return f" ({s.date})" if s is not None and s.date else ""


def _short(s: BisectStep | None) -> str:
    return s.git[:10] if s is not None and s.git else "?"


def _cell(text: str) -> str:
    return md(clip(one_line(text), 200)) or "—"
