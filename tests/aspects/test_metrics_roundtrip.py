"""Every aspect with a folder reads its results through its typed Metrics and writes them back unchanged: each
golden case's reports (tests/report/report_cases.py) are written as report.json with and without their metrics
going through the types, and each real report.json recorded beside an aspect's tests (tests/aspects/<folder>/
*.report.json, as `run` wrote it) is read, sent through the types and written again: the bytes are the same."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest

from torch_upgrade_check.aspects import TABLE, part
from torch_upgrade_check.model import Report
from torch_upgrade_check.schema import read_reports, write_reports

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "report"))
from report_cases import cases  # noqa: E402  (tests/report is not a package)

RECORDED = sorted(HERE.glob("*/*.report.json"))


def _reports() -> list[list[Report]]:
    """Every golden case's reports, and every recorded report.json's."""
    return [*cases().values(), *(read_reports(p) for p in RECORDED)]


def _through_types(report: Report) -> tuple[Report, int]:
    """The report with every foldered aspect's metrics read as its Metrics and written back; how many were."""
    results, typed = [], 0
    for r in report.results:
        judge = part(r.aspect, "judge")
        metrics = judge.Metrics.from_dict(r.metrics).to_dict() if judge is not None else r.metrics
        results.append(dataclasses.replace(r, metrics=metrics))
        typed += judge is not None
    return dataclasses.replace(report, results=results), typed


def _written(reports: list[Report], path: Path) -> bytes:
    write_reports(reports, path)
    return path.read_bytes()


def test_every_golden_report_written_through_the_types_is_byte_for_byte_unchanged(tmp_path: Path) -> None:
    for name, reports in cases().items():
        typed = [_through_types(r)[0] for r in reports]
        assert _written(typed, tmp_path / "typed.json") == _written(reports, tmp_path / "plain.json"), name


def test_every_recorded_report_json_is_written_back_byte_for_byte(tmp_path: Path) -> None:
    typed = 0
    for path in RECORDED:
        again = [_through_types(r) for r in read_reports(path)]
        assert _written([r for r, _ in again], tmp_path / "again.json") == path.read_bytes(), path
        typed += sum(n for _, n in again)
    assert typed, "no result of a foldered aspect was read: the round trip compared nothing"


def _types() -> dict[str, list[str]]:
    """Each foldered aspect's Metrics type, by its qualified name, and the aspects it types (a family may share one)."""
    types: dict[str, list[str]] = {}
    for a in TABLE:
        if a.folder:
            metrics = part(a.name, "judge").Metrics
            types.setdefault(f"{metrics.__module__}.{metrics.__qualname__}", []).append(a.name)
    return types


@pytest.mark.parametrize("metrics", sorted(_types()))
def test_each_metrics_type_has_a_report_to_read(metrics: str) -> None:
    """A round trip that never met a type's metrics would pass for nothing (deterministic-backward, CUDA only, shares
    determinism's type: determinism's CPU report reads it)."""
    aspects = _types()[metrics]
    assert any(r.aspect in aspects and r.metrics for reports in _reports() for report in reports
               for r in report.results), (
        f"{metrics} ({', '.join(aspects)}): record a real report as tests/aspects/<folder>/<name>.report.json")


def test_a_key_the_type_does_not_name_is_kept_in_its_place() -> None:
    judge = part("dataloader", "judge")
    assert judge is not None
    raw = json.loads('{"future_key": [1, {"a": null}], "runs": [{"outcome": "equal", "new": 1}], "mode": null}')
    m = judge.Metrics.from_dict(raw)
    assert m.runs[0].outcome == "equal" and m.mode is None and m.has("mode") and not m.has("workers")
    assert json.dumps(m.to_dict()) == json.dumps(raw)
