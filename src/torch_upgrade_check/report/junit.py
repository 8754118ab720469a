"""Reports -> JUnit XML that validates against the Jenkins xUnit schema (junit-10.xsd)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any
from xml.etree import ElementTree as ET

from junitparser import Error, Failure, JUnitXml, Skipped, TestCase, TestSuite

from torch_upgrade_check.model import CheckResult, Outcome, Report
from torch_upgrade_check.report import (
    FAILING,
    attribution,
    clip,
    deciding,
    finite_seconds,
    nothing_ran,
    one_line,
    run_names,
    visible,
    warning_word,
)

NAME = "torch-upgrade-check"
MESSAGE_LIMIT = 500  # the `message` attribute is one short line; the body carries the rest


def build_junit(reports: Sequence[Report]) -> JUnitXml:
    """One <testsuite> per report, one <testcase> per check.

    failed -> <failure>; error and not-run -> <error> (not-run fails the verdict, so it must not look
    green); skipped -> <skipped>; suspicious -> a passing case whose <system-out> starts with
    "suspicious" and the reason (it warns and never fails; a correctness failure the baseline shares at the same size
    starts "shared failure (the model's own, not the upgrade's)"). A run that could not happen gets one `infrastructure`
    <error> case, a run where nothing ran one `nothing-ran` <failure> case, so JUnit agrees with the verdict.
    A comparison's baseline gets its own suite, but informs only: its failing checks become <skipped>
    (type `baseline-failed`, `baseline-error`, `baseline-not-run`), so JUnit consumers count no failure
    the verdict ignores; a baseline that could not run at all still is an <error>.
    The schema allows no <properties> inside <testcase>: per-check metrics go to its <system-out>,
    the environment to the suite's <properties>. <testsuites> carries no `skipped` (the schema forbids it).
    """
    xml = JUnitXml(name=NAME)
    tests = failures = errors = 0
    time = 0.0
    decide = {id(r) for r in deciding(reports)}
    for report, run in zip(reports, run_names(reports)):
        suite = _suite(report, run, informs=id(report) not in decide)
        xml.append(suite)  # not add_testsuite(): that merges suites that compare equal
        tests, failures, errors = tests + suite.tests, failures + suite.failures, errors + suite.errors
        time += suite.time
    xml.tests, xml.failures, xml.errors, xml.time = tests, failures, errors, round(time, 3)
    return xml


def junit_to_string(xml: JUnitXml) -> str:
    """Indented UTF-8 XML text with its declaration (bodies and messages are left as they are)."""
    root = ET.fromstring(xml.tostring())
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def xml_text(value: Any) -> str:
    """Multi-line text safe for XML 1.0 (ElementTree escapes &, <, >; illegal characters are spelt out)."""
    return visible(str(value).replace("\r\n", "\n"), keep="\t\n")


def xml_message(text: str) -> str:
    return clip(one_line(text), MESSAGE_LIMIT)


def _name(text: str) -> str:
    """Names keep every character distinct: a newline shows as `\\n` rather than a space."""
    return clip(visible(text), MESSAGE_LIMIT)


def _suite(report: Report, run: str, *, informs: bool) -> TestSuite:
    suite = TestSuite(_name(f"{NAME} {run}"))
    if report.started:
        suite.timestamp = xml_message(report.started)
    for name, value in _properties(report):
        suite.add_property(xml_message(name), xml_message(value))
    cases = [_case(result, informs=informs) for result in report.results]
    if report.infra_error:
        case = TestCase("infrastructure", classname=_name(f"torch_upgrade_check.{report.device}"))
        error = Error(xml_message(f"the run on {run} could not happen: {report.infra_error}"), "infrastructure")
        error.text = xml_text(report.infra_error)
        case.result = [error]
        cases.append(case)
    elif nothing_ran(report) and not informs:
        case = TestCase("nothing-ran", classname=_name(f"torch_upgrade_check.{report.device}"))
        skipped = report.counts()["skipped"]
        case.result = [Failure(xml_message(f"nothing ran on {run}: no check passed ({skipped} skipped)"), "nothing-ran")]
        cases.append(case)
    for case in cases:
        suite.append(case)  # append, then count once: add_testcase() recounts every time
    suite.update_statistics()  # sets tests/failures/errors/skipped/time from the cases
    return suite


def _properties(report: Report) -> list[tuple[str, str]]:
    props = [
        ("tool_version", report.tool_version),
        ("device", report.device),
        ("requested_device", report.requested_device),
        ("label", report.label),
        ("role", report.role),
        ("started", report.started),
        ("finished", report.finished),
        ("complete", str(report.complete).lower()),
        ("command", " ".join(report.command)),
    ]
    # every package beside torch is in report.json; the diff of those that changed is in the summary
    props += [(f"env.{k}", _value(v)) for k, v in report.environment.items() if k != "packages"]
    props += [(f"threshold.{k}", _value(v)) for k, v in report.thresholds.items()]
    return [(k, v) for k, v in props if v != ""]


def _case(result: CheckResult, *, informs: bool) -> TestCase:
    case = TestCase(
        _name(result.id),
        classname=_name(f"torch_upgrade_check.{result.device}.{result.workload}"),
        time=finite_seconds(result.duration_s),
    )
    reason = result.reason or f"{result.aspect} check {result.outcome.value}"
    if informs and result.outcome in FAILING:
        word = "not run" if result.outcome is Outcome.NOT_RUN else result.outcome.value
        outcome: Failure | Error | Skipped | None = Skipped(
            xml_message(f"baseline {word} (informs only, does not decide): {reason}"), f"baseline-{result.outcome.value}")
        outcome.text = xml_text(_body(result))
    elif result.outcome is Outcome.FAILED:
        outcome = Failure(xml_message(reason), xml_message(result.aspect))
    elif result.outcome is Outcome.ERROR:
        outcome = Error(xml_message(reason), "error")
    elif result.outcome is Outcome.NOT_RUN:
        outcome = Error(xml_message(f"not run: {reason}"), "not-run")
    elif result.outcome is Outcome.SKIPPED:
        outcome = Skipped(xml_message(reason))
    else:
        outcome = None
    if outcome is not None:
        if not isinstance(outcome, Skipped):
            outcome.text = xml_text(_body(result))
        case.result = [outcome]
    out = "\n".join(f"{k}: {_value(v)}" for k, v in result.metrics.items())
    if result.outcome is Outcome.SUSPICIOUS:  # passes, so the note goes where a passing case keeps text
        word = warning_word(result)
        out = "\n\n".join(p for p in (f"{word} (warns, does not fail): {_body(result) or reason}", out) if p)
    if out:
        case.system_out = xml_text(out)
    return case


def _body(result: CheckResult) -> str:
    parts = [result.reason, attribution.text_block(result), result.details.strip("\n")]
    if result.thresholds:
        parts.append("thresholds: " + ", ".join(f"{k}={_value(v)}" for k, v in result.thresholds.items()))
    if result.repro:
        parts.append(f"repro: {result.repro}")
    return "\n\n".join(p for p in parts if p)


def _value(value: Any) -> str:
    """A metric or property as short text: long lists are cut, structures become compact JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        more = f" … ({len(value)} in all)" if len(value) > 10 else ""
        return clip(json.dumps(list(value[:10]), default=str, ensure_ascii=False), 1000) + more
    if isinstance(value, dict):
        return clip(json.dumps(value, default=str, ensure_ascii=False), 1000)
    return str(value)
