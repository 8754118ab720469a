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
    """A candidate's latency result with the figures and A/B metrics compare gives it (analysis.abjudge)."""
    samples = [round(1.5 * ratio * (1 + (i % 5 - 2) / 100), 6) for i in range(12)]
    metrics = {"samples_ms": samples, "threads": 2, "median_ms": 1.5 * ratio, "iqr_ms": 0.03 * ratio,
               "change": "regression" if outcome is Outcome.FAILED else "unchanged", "ratio": ratio,
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


def noisy_ratios(seed: int, runs: int, step_at: int | None = None, step: float = 1.15) -> list[float]:
    """A check's A/B ratio run by run: 3% noise, 3% of runs 10-25% off, a step from `step_at` on."""
    import math
    import random

    rng = random.Random(seed)
    out = []
    for i in range(runs):
        x = rng.gauss(0.0, 0.03) + (rng.choice((-1, 1)) * rng.uniform(0.10, 0.25) if rng.random() < 0.03 else 0.0)
        out.append(math.exp(x) * (step if step_at is not None and i >= step_at else 1.0))
    return out


def nightly(day: int) -> str:
    return f"2.15.0.dev202611{day:02d}+cpu" if day <= 30 else f"2.15.0.dev202612{day - 30:02d}+cpu"


def history_records(ratios: list[float], *, identity: dict[str, Any] | None = None, first_day: int = 1,
                    outcomes: list[Outcome] | None = None, check: str = "correctness") -> list[dict[str, Any]]:
    """Records as `history --append` makes them, one a nightly: mlp's latency at these ratios, and one other check."""
    from torch_upgrade_check.history.record import from_report

    records = []
    for i, ratio in enumerate(ratios):
        other = correctness("mlp", outcomes[i] if outcomes else Outcome.PASSED)
        text = comparison("2.14.0", nightly(first_day + i), latency("mlp", ratio), other)
        records.append(from_report(load(text), identity=identity or IDENTITY, commit=f"{i:040x}",
                                   when="2026-11-01T04:00:00Z"))
    return records
