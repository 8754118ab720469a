"""JUnit: valid against junit-10.xsd, counts that add up, outcomes mapped, every string made safe for XML."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from junitparser import Error, Failure, JUnitXml, Skipped
from lxml import etree
from report_cases import XSD, cases, check, oversized, report

from torch_upgrade_check.report.junit import build_junit, junit_to_string

SCHEMA = etree.XMLSchema(etree.parse(str(XSD)))
CASES = cases()


def _validated(reports: list) -> etree._Element:
    text = junit_to_string(build_junit(reports))
    root = etree.fromstring(text.encode("utf-8"))
    assert SCHEMA.validate(root), SCHEMA.error_log
    return root


def _case(xml: JUnitXml, name: str):
    return next(c for suite in xml for c in suite if c.name == name)


@pytest.mark.parametrize("case", sorted(CASES))
def test_validates_and_counts_add_up(case: str) -> None:
    root = _validated(CASES[case])
    assert "skipped" not in root.attrib  # junit-10.xsd has no `skipped` on <testsuites>
    assert int(root.get("tests")) == len(root.findall("./testsuite/testcase"))
    for suite in root.findall("testsuite"):
        cases_ = suite.findall("testcase")
        assert int(suite.get("tests")) == len(cases_)
        assert int(suite.get("failures")) == sum(len(c.findall("failure")) for c in cases_)
        assert int(suite.get("errors")) == sum(len(c.findall("error")) for c in cases_)
    xml = JUnitXml.fromstring(junit_to_string(build_junit(CASES[case])).encode("utf-8"))
    assert sum(len(suite) for suite in xml) == int(root.get("tests"))


def test_outcomes_map_to_junit_results() -> None:
    xml = JUnitXml.fromstring(junit_to_string(build_junit(CASES["crash_and_timeout"])).encode("utf-8"))
    crash = _case(xml, "resnet18[float32]/numerics").result[0]
    assert isinstance(crash, Error) and crash.message == "worker crashed with SIGSEGV (exit code -11)"
    assert "Segmentation fault" in crash.text and "repro: torch-upgrade-check run" in crash.text
    not_run = _case(xml, "resnet18[float32]/latency").result[0]
    assert isinstance(not_run, Error) and not_run.type == "not-run" and not_run.message.startswith("not run: ")
    assert _case(xml, "mlp[float32]/numerics").is_passed

    xml = JUnitXml.fromstring(junit_to_string(build_junit(CASES["correctness_failure"])).encode("utf-8"))
    case = _case(xml, "resnet18[bfloat16]/numerics")
    failure = case.result[0]
    assert isinstance(failure, Failure) and failure.type == "numerics" and "\n" not in failure.message
    assert "top mismatches:" in failure.text and "thresholds: rtol=0.016, atol=1e-05" in failure.text
    assert case.classname == "torch_upgrade_check.cpu.resnet18" and case.time == pytest.approx(0.412)
    assert "max_abs_err: 0.031" in case.system_out

    xml = JUnitXml.fromstring(junit_to_string(build_junit(CASES["skipped_device"])).encode("utf-8"))
    skipped = _case(xml, "resnet18[float32]/numerics").result[0]
    assert isinstance(skipped, Skipped) and skipped.message.startswith("MPS not available")


def test_infra_error_and_nothing_ran_get_one_case_each() -> None:
    root = _validated(CASES["infra_error"])
    (case,) = root.findall("./testsuite/testcase")
    assert case.get("name") == "infrastructure" and case.find("error").get("type") == "infrastructure"
    assert "libcudart.so.12" in case.find("error").get("message")
    root = _validated(CASES["nothing_ran"])
    (case,) = root.findall("./testsuite/testcase")
    assert case.get("name") == "nothing-ran" and case.find("failure") is not None
    root = _validated(CASES["skipped_device"])  # all skipped: a nothing-ran failure besides the skips
    assert root.get("failures") == "1" and len(root.findall(".//skipped")) == 9


def test_hostile_strings_are_escaped_not_lost() -> None:
    root = _validated(CASES["hostile_names"])
    (suite,) = root.findall("testsuite")
    name = suite.findall("testcase")[0].get("name")
    assert name.startswith("evil|name`code`<script>alert(1)</script>\\nnext%0A,a:b\\x00\\u202e\\ud800")
    text = etree.tostring(root, encoding="unicode")
    assert "\x00" not in text and "\u202e" not in text and "<script>" not in text


def test_same_named_runs_stay_separate_suites() -> None:
    root = _validated([report(check("a", "numerics")), report(check("a", "numerics"))])
    names = [s.get("name") for s in root.findall("testsuite")]
    assert len(names) == 2 and len(set(names)) == 2 and root.get("tests") == "2"


@pytest.mark.parametrize("duration", [math.nan, math.inf, -1.0, 1e-9, 123456.78912])
def test_odd_durations_still_validate(duration: float) -> None:
    root = _validated([report(check("a", "numerics", duration_s=duration), check("b", "numerics", duration_s=1.5))])
    assert re.fullmatch(r"[0-9]+(\.[0-9]+)?", root.find("testsuite").get("time"))


def test_oversized_report_validates() -> None:
    root = _validated([oversized()])
    assert root.get("tests") == "20000" and root.get("failures") == "500"



def test_without_lxml_the_output_is_the_same() -> None:
    """junitparser falls back to ElementTree, which writes illegal characters silently: ours are gone first."""
    code = (
        "import sys; sys.modules['lxml'] = None\n"
        "from report_cases import cases\n"
        "from torch_upgrade_check.report.junit import build_junit, junit_to_string\n"
        "sys.stdout.buffer.write(junit_to_string(build_junit(cases()['hostile_names'])).encode('utf-8'))\n"
    )
    here = Path(__file__).resolve().parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(here), str(here.parents[1] / "src")])}
    proc = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode()
    root = etree.fromstring(proc.stdout)
    assert SCHEMA.validate(root), SCHEMA.error_log
    with_lxml = _validated(CASES["hostile_names"])
    assert etree.tostring(root, method="c14n") == etree.tostring(with_lxml, method="c14n")


def test_comparison_gets_a_suite_per_version_and_the_baseline_never_fails() -> None:
    root = _validated(CASES["comparison_regression"])
    baseline, candidate = root.findall("testsuite")
    assert baseline.get("name") == "torch-upgrade-check cuda baseline 2.12.0"
    assert candidate.get("name") == "torch-upgrade-check cuda candidate 2.13.0"
    assert baseline.find("properties/property[@name='role']").get("value") == "baseline"
    # The baseline's own failure informs only: skipped, so JUnit consumers agree with the verdict.
    assert (baseline.get("failures"), baseline.get("errors"), baseline.get("skipped")) == ("0", "0", "1")
    skipped = baseline.find("testcase[@name='transformer_block[float32]/compile']/skipped")
    assert skipped.get("type") == "baseline-failed" and skipped.get("message").startswith("baseline failed (informs only")
    assert (candidate.get("failures"), root.get("failures")) == ("3", "3")


def test_suspicious_passes_with_a_note() -> None:
    xml = JUnitXml.fromstring(junit_to_string(build_junit(CASES["comparison_regression"])).encode("utf-8"))
    suspicious = next(c for suite in xml for c in suite
                      if c.name == "transformer_block[float32]/latency" and "candidate" in suite.name)
    assert suspicious.is_passed and not suspicious.is_skipped
    assert suspicious.system_out.startswith("suspicious (warns, does not fail): suspicious: latency 1.14× slower")
    assert "1.14× slower (95% CI 1.02–1.26)" in suspicious.system_out
    regression = _case(xml, "resnet18[float32]/latency")  # the baseline's suite comes first: its case passed
    assert regression.is_passed
    failure = next(c for suite in xml for c in suite if c.name == "resnet18[float32]/latency" and "candidate" in suite.name)
    assert isinstance(failure.result[0], Failure)
    assert "regression: latency 1.32× slower (95% CI 1.27–1.37), 10 ms → 13.2 ms" in failure.result[0].text


def test_a_baseline_that_could_not_run_is_still_an_error() -> None:
    import dataclasses

    baseline, candidate = CASES["comparison_clean"]
    broken = dataclasses.replace(baseline, results=(), infra_error="pip could not install torch==2.12.0")
    root = _validated([broken, candidate])
    assert root.get("errors") == "1"
    assert root.find("testsuite/testcase[@name='infrastructure']/error") is not None
    nothing = dataclasses.replace(baseline, results=())  # nothing ran in the baseline: informs, no failure case
    assert _validated([nothing, candidate]).get("failures") == "0"
