"""Report.json files as run and compare write them (schema.write_reports over model objects), for the history tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from torch_upgrade_check.model import CheckResult, Outcome, Report
from torch_upgrade_check.schema import reports_to_json

IDENTITY = {"cpu": "AMD EPYC 9654 96-Core Processor", "gpu": None, "driver": None, "os": "Ubuntu 24.04",
            "machine": "x86_64", "kernel": "6.8.0-1017-azure", "runner": "GitHub Actions 3"}


def _env(version: str) -> dict[str, Any]:
    return {"torch_version": version, "torch_git": "0123456789abcdef" + version[-4:], "os": "Linux-6.8.0-x86_64",
            "cpu": IDENTITY["cpu"], "python": "3.12.4"}


def latency(workload: str, ratio: float, outcome: Outcome = Outcome.PASSED) -> CheckResult:
    """A candidate's latency result with the A/B metrics compare gives it (analysis.ab.Decision.metrics)."""
    metrics = {"change": "regression" if outcome is Outcome.FAILED else "unchanged", "ratio": ratio,
               "ci_low": ratio * 0.97, "ci_high": ratio * 1.03, "p_value": 0.2, "baseline_median": 1.5,
               "candidate_median": 1.5 * ratio, "rounds": 12, "confirmed": outcome is Outcome.FAILED,
               "significant": False, "ci_level": 0.95, "run_ci_low": float("nan")}
    return CheckResult(workload, "latency", "cpu", "float32", outcome, reason="", metrics=metrics)


def correctness(workload: str, outcome: Outcome = Outcome.PASSED) -> CheckResult:
    return CheckResult(workload, "correctness", "cpu", "float32", outcome, metrics={"max_abs_err": 1e-7})


def comparison(baseline: str, candidate: str, *results: CheckResult) -> str:
    """compare's report.json text: the baseline's and the candidate's reports."""
    def side(label: str, role: str, rs: tuple[CheckResult, ...]) -> Report:
        return Report(tool_version="1.0.0", device="cpu", requested_device="cpu", label=label,
                      command=["torch-upgrade-check", "compare"], started="2026-12-03T04:00:00+00:00",
                      finished="2026-12-03T04:09:00+00:00", complete=True, environment=_env(label), results=rs,
                      role=role)

    base = tuple(CheckResult(r.workload, r.aspect, r.device, r.dtype, Outcome.PASSED) for r in results)
    return reports_to_json([side(baseline, "baseline", base), side(candidate, "candidate", results)])


def single_run(version: str, *results: CheckResult) -> str:
    return reports_to_json([Report(tool_version="1.0.0", device="cpu", requested_device="cpu", label=version,
                                   command=["torch-upgrade-check", "run"], started="2026-12-03T04:00:00+00:00",
                                   complete=True, environment=_env(version), results=results)])


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def load(text: str) -> dict[str, Any]:
    return json.loads(text)
