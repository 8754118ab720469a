"""What compare judges from both sides' results (analysis.sides.judge_against_baseline): the two reports its tests
build (an aspect's own compare rule is tested in its folder: tests/aspects/compile/test_compile_graph_breaks.py)."""

from __future__ import annotations

from typing import Any

from torch_upgrade_check.analysis.sides import judge_against_baseline
from torch_upgrade_check.model import CheckResult, Outcome, Report


def result(workload: str, aspect: str, **metrics: Any) -> CheckResult:
    return CheckResult(workload, aspect, "cpu", "float32", Outcome.PASSED, reason="ok", metrics=metrics)


def report(role: str, *results: CheckResult) -> Report:
    return Report(tool_version="1", device="cpu", requested_device="cpu", label=f"{role}-torch", command=["x"],
                  started="2026-12-01T00:00:00+00:00", complete=True, results=results, role=role)


def judged(before: list[CheckResult], after: list[CheckResult], fail_on: frozenset[str] = frozenset()) -> dict:
    out = judge_against_baseline(report("baseline", *before), report("candidate", *after), fail_on)
    return {r.id: r for r in out.results}
