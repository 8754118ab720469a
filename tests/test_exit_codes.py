"""The action's contract, part one: the exit code. Every `--fail-on` x outcome x aspect x role, nothing ran,
and a run that could not happen, decided by commands.common.exit_code on Reports built in memory (no torch)."""

from __future__ import annotations

import itertools

import pytest

from torch_upgrade_check.commands.common import exit_code
from torch_upgrade_check.commands.settings import parse_fail_on
from torch_upgrade_check.errors import EXIT_FAILED, EXIT_INFRA, EXIT_PASSED, UsageError
from torch_upgrade_check.model import FAIL_ON, CheckResult, Outcome, Report

FAIL_ONS = [frozenset(FAIL_ON), frozenset({"correctness"}), frozenset({"latency"}), frozenset({"memory"}),
            frozenset({"latency", "memory"}), frozenset({"warnings"}), frozenset()]  # frozenset(): --fail-on none
ASPECTS = ("numerics", "cross-backend", "cross-version", "compile", "determinism", "fsdp2", "latency", "memory",
           "warnings")
ROLES = ("", "candidate", "baseline")


def result(aspect: str, outcome: Outcome, workload: str = "mlp") -> CheckResult:
    return CheckResult(workload, aspect, "cpu", "float32", outcome, reason=f"{aspect} {outcome.value}")


def report(*results: CheckResult, role: str = "", infra_error: str = "") -> Report:
    return Report(tool_version="1", device="cpu", requested_device="cpu", label="2.13.0", command=["x"],
                  started="2026-01-01T00:00:00+00:00", complete=True, results=results, role=role,
                  infra_error=infra_error)


def reports_with(check: CheckResult, role: str) -> list[Report]:
    """`check` beside a passing one, in a plain run (role "") or in one side of a comparison."""
    ok = result("numerics", Outcome.PASSED, workload="ok")
    if role == "":
        return [report(ok, check)]
    other = report(ok, role="candidate" if role == "baseline" else "baseline")
    mine = report(ok, check, role=role)
    return [mine, other] if role == "baseline" else [other, mine]


def failure_kind(outcome: Outcome, aspect: str) -> str | None:
    """What the README promises: a failed latency, memory or warnings check is that kind; every other failing outcome
    (a failed correctness check, a crash, a timeout, a check that did not run) is correctness; the rest pass."""
    if outcome in (Outcome.PASSED, Outcome.SUSPICIOUS, Outcome.SKIPPED):
        return None
    if outcome is Outcome.FAILED and aspect in ("latency", "memory", "warnings"):
        return aspect
    return "correctness"


def case_id(value: object) -> str:
    if isinstance(value, frozenset):
        return ",".join(sorted(value)) or "none"
    return str(getattr(value, "value", value)) or "run"


@pytest.mark.parametrize(("fail_on", "outcome", "aspect", "role"),
                         list(itertools.product(FAIL_ONS, Outcome, ASPECTS, ROLES)), ids=case_id)
def test_fail_on_decides_by_the_kind_of_failure_and_the_baseline_never_does(
        fail_on: frozenset[str], outcome: Outcome, aspect: str, role: str) -> None:
    kind = failure_kind(outcome, aspect)
    expected = EXIT_FAILED if kind in fail_on and role != "baseline" else EXIT_PASSED
    assert exit_code(reports_with(result(aspect, outcome), role), fail_on) == expected


@pytest.mark.parametrize("fail_on", FAIL_ONS, ids=case_id)
@pytest.mark.parametrize("results", [(), (result("numerics", Outcome.SKIPPED), result("latency", Outcome.SKIPPED))],
                         ids=["no checks", "only skipped"])
def test_nothing_ran_is_a_correctness_failure(fail_on: frozenset[str], results: tuple[CheckResult, ...]) -> None:
    assert exit_code([report(*results)], fail_on) == (EXIT_FAILED if "correctness" in fail_on else EXIT_PASSED)
    # in a comparison only the candidate's emptiness counts
    ok = report(result("numerics", Outcome.PASSED), role="candidate")
    assert exit_code([report(*results, role="baseline"), ok], fail_on) == EXIT_PASSED
    assert exit_code([report(result("numerics", Outcome.PASSED), role="baseline"), report(*results, role="candidate")],
                     fail_on) == (EXIT_FAILED if "correctness" in fail_on else EXIT_PASSED)


@pytest.mark.parametrize("fail_on", FAIL_ONS, ids=case_id)
@pytest.mark.parametrize("broken", ["", "candidate", "baseline", "second runner"])
def test_a_run_that_could_not_happen_is_exit_3_whatever_fail_on_says(fail_on: frozenset[str], broken: str) -> None:
    passing = result("numerics", Outcome.PASSED)
    if broken == "":
        reports = [report(infra_error="cannot import torch")]
    elif broken == "second runner":
        reports = [report(passing), report(infra_error="no report from this runner: cancelled")]
    else:
        reports = [report(passing, role=r, infra_error="install failed" if r == broken else "")
                   for r in ("baseline", "candidate")]
    assert exit_code(reports, fail_on) == EXIT_INFRA


def test_merged_runners_fail_only_on_the_kinds_fail_on_names() -> None:
    slow = [report(result("numerics", Outcome.PASSED)), report(result("latency", Outcome.FAILED))]
    assert exit_code(slow, frozenset({"correctness"})) == EXIT_PASSED
    assert exit_code(slow, frozenset({"latency"})) == EXIT_FAILED
    assert exit_code([*slow, report(result("numerics", Outcome.ERROR))], frozenset({"correctness"})) == EXIT_FAILED


@pytest.mark.parametrize(("text", "parsed"), [
    ("correctness,latency,memory,warnings", frozenset(FAIL_ON)), ("correctness,warnings", {"correctness", "warnings"}),
    ("none", frozenset()), (" latency , memory ", {"latency", "memory"}),
])
def test_fail_on_parses(text: str, parsed: frozenset[str]) -> None:
    assert parse_fail_on(text) == parsed


@pytest.mark.parametrize("text", ["", "speed", "none,latency", "correctness,,speed"])
def test_bad_fail_on_is_one_sentence(text: str) -> None:
    with pytest.raises(UsageError) as e:
        parse_fail_on(text)
    assert e.value.problems == (f"--fail-on must be a comma list of correctness, latency, memory, warnings, or none, got {text!r}",)
