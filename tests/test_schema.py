"""report.json: versioned, round-trips, refuses what it cannot read, written atomically."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from torch_upgrade_check.model import CheckResult, Outcome, Report, Verdict
from torch_upgrade_check.schema import SchemaError, read_report, report_from_json, write_report


def make(*outcomes: Outcome, infra: str = "") -> Report:
    results = tuple(CheckResult("mlp", f"a{i}", "cpu", "float32", o, metrics={"rmse": float("nan")})
                    for i, o in enumerate(outcomes))
    return Report("0.1.0", "cpu", "auto", "2.13.0", ["x"], "2026-01-01T00:00:00+00:00", results=results,
                  infra_error=infra)


def test_round_trip_keeps_everything_and_nan_becomes_a_string(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "report.json"
    write_report(make(Outcome.PASSED, Outcome.FAILED), path)
    doc = json.loads(path.read_text())
    assert doc["kind"] == "torch-upgrade-check/report" and doc["schema_version"] == 1
    assert doc["results"][1]["id"] == "mlp[float32]/a1" and doc["results"][0]["metrics"]["rmse"] == "nan"
    back = read_report(path)
    assert [r.outcome for r in back.results] == [Outcome.PASSED, Outcome.FAILED]
    assert list(tmp_path.joinpath("deep").iterdir()) == [path]  # no temporary file left behind


def test_wrong_version_or_kind_is_a_clear_error() -> None:
    with pytest.raises(SchemaError, match="schema_version 99"):
        report_from_json(json.dumps({"kind": "torch-upgrade-check/report", "schema_version": 99}))
    with pytest.raises(SchemaError, match="not a torch-upgrade-check report"):
        report_from_json("{}")
    with pytest.raises(SchemaError, match="not JSON"):
        report_from_json("{")


@pytest.mark.parametrize(("outcomes", "infra", "verdict"), [
    ((Outcome.PASSED, Outcome.SKIPPED), "", Verdict.PASSED),
    ((Outcome.PASSED, Outcome.FAILED), "", Verdict.FAILED),
    ((Outcome.PASSED, Outcome.ERROR), "", Verdict.FAILED),
    ((Outcome.PASSED, Outcome.NOT_RUN), "", Verdict.FAILED),
    ((Outcome.SKIPPED,), "", Verdict.FAILED),  # nothing ran fails by default
    ((), "", Verdict.FAILED),
    ((Outcome.PASSED,), "torch missing", Verdict.ERROR),
])
def test_verdicts(outcomes: tuple[Outcome, ...], infra: str, verdict: Verdict) -> None:
    assert make(*outcomes, infra=infra).verdict() is verdict
