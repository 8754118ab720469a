"""History records from real report.json files, and the JSON Lines store: append, read, roll, and bad lines."""

from __future__ import annotations

import gzip
import json
import os
import re
import stat
from pathlib import Path

import jsonschema
import pytest
from history_cases import IDENTITY, comparison, correctness, latency, load, single_run

from torch_upgrade_check.analysis import trends
from torch_upgrade_check.analysis.trends import analyse
from torch_upgrade_check.aspects import TABLE
from torch_upgrade_check.errors import UsageError
from torch_upgrade_check.history import record as rec
from torch_upgrade_check.history import store
from torch_upgrade_check.model import CheckResult, Outcome

SCHEMA = json.loads((Path(__file__).resolve().parents[1] / "schema" / "history-record.schema.json").read_text())


def _record(n: int, ratio: float = 1.0) -> dict:
    text = comparison("2.14.0", f"2.15.0.dev202612{n % 28 + 1:02d}+cpu", latency("mlp", ratio), correctness("mlp"))
    return rec.from_report(load(text), identity=IDENTITY, commit=f"{n:040x}", when=f"2026-12-03T04:{n % 60:02d}:00Z")


def test_a_comparison_becomes_one_record_that_the_schema_accepts() -> None:
    text = comparison("2.14.0", "2.15.0.dev20261203+cpu", latency("mlp", 1.18, Outcome.FAILED), correctness("mlp"))
    r = rec.from_report(load(text), identity=IDENTITY, commit="abc123", when="2026-12-03T05:06:07+01:00")
    jsonschema.validate(r, SCHEMA)
    assert r["schema"] == "torch-upgrade-check/history/2"
    assert r["when"] == "2026-12-03T04:06:07Z"  # UTC
    assert r["torch"]["baseline"]["version"] == "2.14.0" and r["torch"]["baseline"]["build_date"] is None
    assert r["torch"]["candidate"]["build_date"] == "2026-12-03"
    lat = r["checks"]["mlp[float32]/latency"]
    assert lat["outcome"] == "failed" and lat["ratio"] == pytest.approx(1.18)
    assert lat["ci"] == pytest.approx([1.18 * 0.97, 1.18 * 1.03])
    # the figures latency's summary table shows, its median first (the samples counted); the A/B engine's own figures
    # (p value, rounds, NaN, booleans) are not key figures
    assert lat["metrics"] == {"median_ms": pytest.approx(1.5 * 1.18), "iqr_ms": pytest.approx(0.03 * 1.18),
                              "samples_ms": 12, "threads": 2}
    assert lat["primary"] == "median_ms"
    assert r["checks"]["mlp[float32]/correctness"] == {"outcome": "passed", "ratio": None, "ci": None,
                                                       "metrics": {"max_abs_err": 1e-7}, "primary": "max_abs_err"}


def test_a_single_run_has_no_baseline() -> None:
    r = rec.from_report(load(single_run("2.15.0.dev20261204+cpu", correctness("mlp"))), identity=IDENTITY,
                        commit="abc", when="2026-12-04T00:00:00Z")
    jsonschema.validate(r, SCHEMA)
    assert r["torch"]["baseline"] == {} and r["torch"]["candidate"]["build_date"] == "2026-12-04"


@pytest.mark.parametrize(("report", "when", "words"), [
    ({"kind": "something-else"}, "2026-12-03T00:00:00Z", "not a torch-upgrade-check report"),
    ([], "2026-12-03T00:00:00Z", "JSON object"),
    ({"kind": "torch-upgrade-check/comparison", "reports": []}, "2026-12-03T00:00:00Z", "holds no reports"),
    ({"kind": "torch-upgrade-check/report"}, "yesterday", "ISO-8601"),
])
def test_bad_input_is_one_sentence_with_the_fix(report: object, when: str, words: str) -> None:
    with pytest.raises(UsageError, match=words):
        rec.from_report(report, identity=IDENTITY, commit="abc", when=when)  # type: ignore[arg-type]


def test_runner_identity_reads_this_machine_and_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    here = rec.runner_identity()
    assert set(rec.IDENTITY_KEYS) <= set(here) and here["cpu"] and here["os"] and here["machine"]
    # nvidia-smi's own CSV output, as a program on PATH prints it: the GPU and driver are read from it
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'NVIDIA H100 80GB HBM3, 570.124.06'\necho 'NVIDIA H100 80GB HBM3, 570.124.06'\n")
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    gpu = rec.runner_identity()
    assert (gpu["gpu"], gpu["driver"]) == ("NVIDIA H100 80GB HBM3", "570.124.06")
    jsonschema.validate({**_record(1), "identity": gpu}, SCHEMA)


def test_records_come_back_oldest_first(tmp_path: Path) -> None:
    records = [_record(n, 1 + n / 100) for n in range(5)]
    for r in records:
        store.append(tmp_path / "store", r)
    assert store.read(tmp_path / "store") == records
    assert len((tmp_path / "store" / "records.jsonl").read_text().splitlines()) == 5


def test_a_missing_store_is_empty(tmp_path: Path) -> None:
    assert store.read(tmp_path / "nowhere") == []


def test_a_torn_last_line_is_reported_and_the_rest_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A write cut short leaves half a line with no newline: the records before it survive, and the next append
    starts a line of its own rather than gluing itself to the torn one."""
    first, second, third = _record(1), _record(2), _record(3)
    store.append(tmp_path, first)
    store.append(tmp_path, second)
    path = tmp_path / "records.jsonl"
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) - 40])  # the second record loses its tail and its newline
    got = store.load(tmp_path)
    assert got.records == [first]
    assert got.problems == [f"records.jsonl line 2 is not JSON ({_json_error(path)}); skipped"]
    store.append(tmp_path, third)
    assert store.read(tmp_path) == [first, third]
    assert "records.jsonl line 2 is not JSON" in capsys.readouterr().err


def _json_error(path: Path) -> str:
    try:
        json.loads(path.read_text().splitlines()[1])
    except json.JSONDecodeError as e:
        return e.msg
    raise AssertionError("the torn line parsed")


def test_lines_that_are_not_records_of_this_version_are_skipped_with_a_reason(tmp_path: Path) -> None:
    good = _record(1)
    newer = {**good, "schema": "torch-upgrade-check/history/3"}
    (tmp_path / "records.jsonl").write_text("\n".join(json.dumps(x) for x in (good, newer, {"a": 1}, [1])) + "\n")
    got = store.load(tmp_path)
    assert got.records == [good]
    assert [p.split(" is ")[0].split(" has ")[0] for p in got.problems] == [
        "records.jsonl line 2", "records.jsonl line 3", "records.jsonl line 4"]
    assert "upgrade it" in got.problems[0]


def test_past_the_bound_the_oldest_records_are_rolled_into_compacted_files(tmp_path: Path) -> None:
    records = [_record(n, 1 + n / 1000) for n in range(14)]  # rolls at the 6th, 10th and 14th
    for r in records:
        store.append(tmp_path, r, max_records=5, keep=2)
    chunks = sorted(p.name for p in (tmp_path / "compacted").iterdir())
    assert chunks == ["0001.jsonl.gz", "0002.jsonl.gz", "0003.jsonl.gz"]
    assert len((tmp_path / "records.jsonl").read_text().splitlines()) <= 5
    assert store.read(tmp_path) == records  # nothing lost, order kept
    # the same records give the same bytes (two jobs that roll alike write the same file)
    again = tmp_path / "again"
    for r in records:
        store.append(again, r, max_records=5, keep=2)
    assert (again / "compacted" / "0001.jsonl.gz").read_bytes() == (tmp_path / "compacted" / "0001.jsonl.gz").read_bytes()


def test_a_roll_cut_short_reads_each_record_once(tmp_path: Path) -> None:
    """The compacted file is written before records.jsonl is cut: a crash between leaves lines in both."""
    records = [_record(n) for n in range(4)]
    (tmp_path / "compacted").mkdir()
    lines = [json.dumps(r, sort_keys=True) + "\n" for r in records]
    with gzip.open(tmp_path / "compacted" / "0001.jsonl.gz", "wt") as f:
        f.write("".join(lines[:3]))
    (tmp_path / "records.jsonl").write_text("".join(lines))
    assert store.load(tmp_path).records == records


def test_an_unreadable_compacted_file_is_reported_not_fatal(tmp_path: Path) -> None:
    store.append(tmp_path, _record(1))
    (tmp_path / "compacted").mkdir()
    (tmp_path / "compacted" / "0001.jsonl.gz").write_bytes(b"not gzip at all")
    got = store.load(tmp_path)
    assert got.records == [_record(1)]
    assert got.problems and got.problems[0].startswith("compacted/0001.jsonl.gz: cannot be read")


def test_append_refuses_what_is_not_a_record(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="schema"):
        store.append(tmp_path, {"when": "2026-12-03T00:00:00Z"})


def _aspect_result(aspect: str, metrics: dict) -> CheckResult:
    return CheckResult("mlp", aspect, "cpu", "float32", Outcome.PASSED, reason="", metrics=metrics)


def test_an_aspect_with_a_folder_keeps_the_figures_its_typed_metrics_give_its_columns() -> None:
    """determinism and dataloader (aspects/<folder>/): their render's columns, read from judge.Metrics by attribute,
    the primary first; a list counted where the column counts it; booleans, strings and other numbers left out."""
    determinism = {"bitwise_equal": True, "differing_tensors": 0, "compared_tensors": 13, "max_abs_diff": 0.0,
                   "first_differing": []}
    dataloader = {"items": 60, "batch_size": 8, "workers": 2, "reference_batches": 16, "pin_memory": False,
                  "runs": [{"start_method": m, "outcome": "equal"} for m in ("fork", "spawn", "forkserver")],
                  "wall_s": 200.0}
    text = comparison("2.14.0", "2.15.0.dev20261203+cpu", _aspect_result("determinism", determinism),
                      _aspect_result("dataloader", dataloader))
    r = rec.from_report(load(text), identity=IDENTITY, commit="abc", when="2026-12-03T00:00:00Z")
    jsonschema.validate(r, SCHEMA)
    assert r["checks"]["mlp[float32]/determinism"] == {
        "outcome": "passed", "ratio": None, "ci": None, "primary": "max_abs_diff",
        "metrics": {"max_abs_diff": 0.0, "differing_tensors": 0}}
    # dataloader sorts by max abs err, which it does not measure: no primary; its loaders counted
    assert r["checks"]["mlp[float32]/dataloader"]["metrics"] == {"runs": 3, "workers": 2, "reference_batches": 16}
    assert r["checks"]["mlp[float32]/dataloader"]["primary"] is None


def test_a_store_holding_version_1_records_reads_them_beside_the_new_ones(tmp_path: Path) -> None:
    """A store an older tool wrote (version 1: every number of a check, no primary) goes on: its records are read,
    analysed with the new ones, and still valid against the schema; the new ones are version 2."""
    old = {"schema": "torch-upgrade-check/history/1", "when": "2026-12-02T04:00:00Z", "commit": "0" * 40,
           "identity": IDENTITY, "torch": {"baseline": {}, "candidate": {"version": "2.15.0.dev20261202+cpu",
                                                                         "git": None, "label": "x", "build_date": "2026-12-02"}},
           "checks": {"mlp[float32]/latency": {"outcome": "passed", "ratio": 1.0, "ci": [0.97, 1.03],
                                               "metrics": {"baseline_median": 1.5, "p_value": 0.2, "ratio": 1.0}}}}
    jsonschema.validate(old, SCHEMA)
    (tmp_path / "records.jsonl").write_text(json.dumps(old) + "\n")
    new = _record(3, 1.01)
    store.append(tmp_path, new)
    got = store.load(tmp_path)
    assert got.problems == [] and got.records == [old, new]
    assert [r["schema"] for r in got.records] == ["torch-upgrade-check/history/1", "torch-upgrade-check/history/2"]
    assert [p.ratio for p in analyse(got.records).series["mlp[float32]/latency"]] == [1.0, 1.01]


def test_the_identity_that_decides_a_series_is_spelled_once() -> None:
    assert rec.IDENTITY_KEYS is trends.IDENTITY_KEYS


def test_history_names_no_aspect() -> None:
    """history/ is generic: an aspect's figures come through its folder (or report.checks' tables), never by name."""
    names = {a.name for a in TABLE}
    folder = Path(rec.__file__).parent
    named = {(p.name, m[1]) for p in folder.glob("*.py") for m in re.finditer(r"[\"']([a-z][a-z-]*)[\"']", p.read_text())
             if m[1] in names}
    assert named == set()
