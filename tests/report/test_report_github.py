"""publish(): the files it writes, the step summary, GITHUB_OUTPUT read back as the runner reads it, and
the rule that only github.py touches GitHub."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from github_runner import read_github_output
from report_cases import cases, oversized

from torch_upgrade_check import github
from torch_upgrade_check.report.summary import render_summary

CASES = cases()
SRC = Path(__file__).resolve().parents[2] / "src" / "torch_upgrade_check"


def _environ(tmp_path: Path, **extra: str) -> dict[str, str]:
    summary, output = tmp_path / "step_summary.md", tmp_path / "github_output"
    summary.write_text("previous step\n", encoding="utf-8")
    output.write_text("other=1\n", encoding="utf-8")
    return {"GITHUB_STEP_SUMMARY": str(summary), "GITHUB_OUTPUT": str(output), "GITHUB_ACTIONS": "true", **extra}


def test_publish_on_github(tmp_path: Path) -> None:
    env, stream = _environ(tmp_path), io.StringIO()
    reports = CASES["correctness_failure"]
    out = github.publish(reports, tmp_path / "out", environ=env, report_path=tmp_path / "r.json", stream=stream)
    summary = (tmp_path / "out" / "summary.md").read_text(encoding="utf-8")
    assert summary == render_summary(reports)
    assert (tmp_path / "out" / "junit.xml").read_text(encoding="utf-8").startswith("<?xml")
    assert Path(env["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8") == "previous step\n\n" + summary
    assert read_github_output(Path(env["GITHUB_OUTPUT"]).read_text(encoding="utf-8")) == {"other": "1", **out}
    assert out["verdict"] == "failed" and out["failed"] == "2"
    assert out["junit"] == str((tmp_path / "out" / "junit.xml").resolve())
    assert out["report"] == str((tmp_path / "r.json").resolve())
    assert [line.split(" ", 1)[0] for line in stream.getvalue().splitlines()] == ["::error", "::error"]


def test_publish_off_github_writes_only_its_files(tmp_path: Path) -> None:
    stream = io.StringIO()
    out = github.publish(CASES["all_passed"], tmp_path / "out", environ={}, stream=stream)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["junit.xml", "summary.md"]
    assert stream.getvalue() == "" and out["verdict"] == "passed" and out["report"] == ""


def test_job_summary_can_be_turned_off(tmp_path: Path) -> None:
    env = _environ(tmp_path, GITHUB_ACTIONS="false")
    stream = io.StringIO()
    github.publish(CASES["crash_and_timeout"], tmp_path / "out", environ=env, job_summary=False, stream=stream)
    assert Path(env["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8") == "previous step\n"
    assert stream.getvalue() == ""  # workflow commands only when GITHUB_ACTIONS is "true"


def test_step_summary_shrinks_to_the_room_left(tmp_path: Path) -> None:
    env = _environ(tmp_path)
    step = Path(env["GITHUB_STEP_SUMMARY"])
    step.write_text("x" * 1_000_000 + "\n", encoding="utf-8")
    github.publish([oversized(4_000)], tmp_path / "out", environ=env, stream=io.StringIO())
    text = step.read_text(encoding="utf-8")
    assert len(text.encode("utf-8")) <= github.STEP_SUMMARY_LIMIT
    assert "## ❌ failed" in text and "truncated to stay under" in text
    step.write_text("x" * (github.STEP_SUMMARY_LIMIT - 100), encoding="utf-8")
    github.publish(CASES["all_passed"], tmp_path / "out", environ=env, stream=io.StringIO())
    assert step.stat().st_size == github.STEP_SUMMARY_LIMIT - 100  # no room: summary.md still has it


def test_output_values_cannot_end_their_block(tmp_path: Path) -> None:
    values = {"a": "line 1\nghadelimiter_x\nother=2\n", "b": "", "c": "x<<y"}
    path = tmp_path / "out.txt"
    github.write_outputs(path, values)
    assert read_github_output(path.read_text(encoding="utf-8")) == values
    assert re.fullmatch(r"a<<ghadelimiter_[0-9a-f-]{36}", path.read_text(encoding="utf-8").splitlines()[0])
    with pytest.raises(ValueError, match="cannot be written"):
        github.format_outputs({"bad\nname": "x"})


def test_report_package_is_pure_and_only_github_py_touches_github() -> None:
    effects = re.compile(r"\bopen\(|os\.environ|sys\.std(out|err)|\bprint\(|write_text|GITHUB_")
    for path in (SRC / "report").glob("*.py"):
        assert not effects.search(path.read_text(encoding="utf-8")), f"{path.name} has I/O; renderers are pure"
    github_only = re.compile(r"[\"'](GITHUB_OUTPUT|GITHUB_STEP_SUMMARY)[\"']|[\"']::(error|warning|notice)\b")
    # canary_workflow.py is the text of a workflow `init --canary` writes (its steps' own echo "::warning ..."),
    # not this program writing to GitHub
    writers_of_text = {"github.py", "canary_workflow.py"}
    offenders = [p.name for p in SRC.rglob("*.py") if p.name not in writers_of_text and p.parent.name != "report"
                 and github_only.search(p.read_text(encoding="utf-8"))]
    assert offenders == [], "only github.py may write GitHub's files and workflow commands"


def test_publish_a_comparison(tmp_path: Path) -> None:
    env, stream = _environ(tmp_path), io.StringIO()
    out = github.publish(CASES["comparison_regression"], tmp_path / "out", environ=env, stream=stream)
    written = read_github_output(Path(env["GITHUB_OUTPUT"]).read_text(encoding="utf-8"))
    assert written["verdict"] == "failed" and written["suspicious"] == "1" and written == {"other": "1", **out}
    kinds = [line.split(" ", 1)[0] for line in stream.getvalue().splitlines()]
    assert kinds == ["::error"] * 3 + ["::warning"]
    assert "### What changed" in Path(env["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8")
