"""`torch-upgrade-check history`: append a report's record, read the store, print, write Markdown, JSON, charts,
the page and the alarm's outputs; bad input exits 2 with one line."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from github_runner import read_github_output
from history_cases import comparison, correctness, history_records, latency, write

from torch_upgrade_check import cli
from torch_upgrade_check.history import charts, record, store
from torch_upgrade_check.model import Outcome
from torch_upgrade_check.stack import tomllib  # tomli before Python 3.11

STEPPED = [1.0, 1.01, 0.99, 1.0, 1.02, 0.98, 1.0, 1.01, 0.99, 1.0, 1.0, 1.18, 1.19]


def _store(folder: Path, ratios: list[float], *, here: bool = False) -> Path:
    for r in history_records(ratios, identity=record.runner_identity() if here else None):
        store.append(folder, r)
    return folder


def test_append_reads_the_report_and_the_alarm_reaches_every_output(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    folder = _store(tmp_path / "store", STEPPED, here=True)  # this runner's series, which the append continues
    report = write(tmp_path / "report.json", comparison("2.14.0", "2.15.0.dev20261114+cpu",
                                                       latency("mlp", 1.17, Outcome.FAILED), correctness("mlp")))
    out = tmp_path / "out"
    rc = cli.main(["history", "--store", str(folder), "--append", str(report), "--commit", "f" * 40,
                   "--markdown", str(out / "summary.md"), "--charts", str(out / "charts"), "--json", str(out / "h.json"),
                   "--alarm-output", str(out / "github_output")])
    assert rc == 0
    records = store.read(folder)
    assert len(records) == 14 and records[-1]["commit"] == "f" * 40
    assert records[-1]["identity"]["cpu"]  # this runner's identity
    assert capsys.readouterr().out == ""  # docs/cli.md: --markdown takes the lines stdout has without it
    # the newest run failed its latency check; the step two runs before it names the first bad nightly
    assert read_github_output((out / "github_output").read_text()) == {
        "alarm": "true", "last-good": "2.15.0.dev20261111+cpu", "first-bad": "2.15.0.dev20261112+cpu"}
    doc = json.loads((out / "h.json").read_text())
    assert doc["alarm"] is True and doc["runs"] == 14 and doc["findings"][0]["kind"] == "step"
    summary = (out / "summary.md").read_text()
    assert "latency 1\\.18x since nightly 2026\\-11\\-12" in summary  # Markdown-escaped
    png = out / "charts" / "mlp-float32-latency.png"
    assert png.read_bytes().startswith(b"\x89PNG") and "(mlp-float32-latency.png)" in summary


def test_the_step_line_and_its_chart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _store(tmp_path / "store", STEPPED)
    rc = cli.main(["history", "--store", str(folder), "--charts", str(tmp_path / "c"), "--alarm-output",
                   str(tmp_path / "o")])
    assert rc == 0
    assert capsys.readouterr().out.splitlines() == [
        "mlp[float32]/latency: latency 1.18x since nightly 2026-11-12 (last good nightly 2026-11-11)"]
    assert read_github_output((tmp_path / "o").read_text()) == {
        "alarm": "true", "last-good": "2.15.0.dev20261111+cpu", "first-bad": "2.15.0.dev20261112+cpu"}
    assert (tmp_path / "c" / "mlp-float32-latency.png").is_file()


def test_with_markdown_the_lines_go_to_the_file_not_stdout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """docs/cli.md: "Without --markdown it prints the same lines to stdout" (with it, the file has them)."""
    folder = _store(tmp_path / "store", STEPPED)
    assert cli.main(["history", "--store", str(folder), "--markdown", str(tmp_path / "s.md")]) == 0
    assert capsys.readouterr().out == ""
    assert "latency 1\\.18x since nightly 2026\\-11\\-12" in (tmp_path / "s.md").read_text()


def test_the_alarm_outputs_are_written_by_github_py_appended_after_other_steps(tmp_path: Path) -> None:
    """The one module that writes GitHub's output files writes these too: its delimited blocks, after what was there."""
    folder = _store(tmp_path / "store", STEPPED)
    out = tmp_path / "o"
    out.write_text("earlier=step\n")
    assert cli.main(["history", "--store", str(folder), "--alarm-output", str(out)]) == 0
    text = out.read_text()
    assert text.startswith("earlier=step\nalarm<<ghadelimiter_")  # github.format_outputs' form, appended
    assert read_github_output(out.read_text()) == {"earlier": "step", "alarm": "true",
                                                   "last-good": "2.15.0.dev20261111+cpu",
                                                   "first-bad": "2.15.0.dev20261112+cpu"}


@pytest.mark.parametrize("flag", ["--append", "--markdown", "--charts", "--html", "--json", "--alarm-output"])
def test_a_file_history_cannot_write_is_exit_3_with_one_line_naming_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str) -> None:
    """A write the runner refuses (here: a folder that is a file) is the runner's failure: exit 3, the path, the cause."""
    folder = _store(tmp_path / "store", STEPPED)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    target = blocker / "inside"
    if flag == "--append":
        report = write(tmp_path / "report.json", comparison("2.14.0", "2.15.0.dev20261114+cpu", correctness("mlp")))
        argv = ["history", "--store", str(target), "--append", str(report)]
    else:
        argv = ["history", "--store", str(folder), flag, str(target)]
    assert cli.main(argv) == 3
    err = [line for line in capsys.readouterr().err.splitlines() if "charts not drawn" not in line]
    assert len(err) == 1, err
    assert "infrastructure error: history could not write" in err[0] and str(blocker) in err[0]
    assert re.search(r": (Not a directory|File exists)$", err[0]), err[0]  # the cause, as the OS said it
    assert "Traceback" not in err[0] and "internal error" not in err[0]


def test_no_change_no_alarm(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _store(tmp_path / "store", [1.0, 1.01, 0.99] * 4)
    assert cli.main(["history", "--store", str(folder), "--alarm-output", str(tmp_path / "o")]) == 0
    assert capsys.readouterr().out == "no check changed: no step, no new failure\n"
    assert read_github_output((tmp_path / "o").read_text()) == {"alarm": "false", "last-good": "", "first-bad": ""}


def test_a_torn_line_in_the_store_is_a_warning_not_a_failure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _store(tmp_path / "store", [1.0] * 3)
    with open(folder / "records.jsonl", "a") as f:
        f.write('{"schema": "torch-upgrade-check/hist')
    assert cli.main(["history", "--store", str(folder)]) == 0
    assert "warning: records.jsonl line 4 is not JSON" in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "words"), [
    (["history"], "history needs --store DIR"),
    (["history", "--store", "{tmp}/nowhere"], "does not exist; pass the store's folder, or --append"),
    (["history", "--store", "{tmp}/s", "--append", "{tmp}/missing.json"], "cannot read --append"),
    (["history", "--store", "{tmp}/s", "--append", "{tmp}/bad.json"], "is not JSON"),
    (["history", "--store", "{tmp}/s", "--append", "{tmp}/other.json"], "not a torch-upgrade-check report"),
])
def test_bad_input_exits_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
                                         words: str) -> None:
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "other.json").write_text('{"kind": "junit"}')
    assert cli.main([a.replace("{tmp}", str(tmp_path)) for a in argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0] and "Traceback" not in err[0]


def test_without_matplotlib_the_lines_are_written_and_the_missing_charts_said(tmp_path: Path) -> None:
    """The orchestrator installs without the history extra: history still writes its summary, page and outputs."""
    folder = _store(tmp_path / "store", STEPPED)
    code = ("import sys; sys.modules['matplotlib'] = None\nfrom torch_upgrade_check import cli\n"
            f"sys.exit(cli.main(['history', '--store', {str(folder)!r}, '--charts', {str(tmp_path / 'c')!r}, "
            f"'--markdown', {str(tmp_path / 's.md')!r}, '--html', {str(tmp_path / 'page')!r}]))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "charts not drawn: matplotlib is not installed here" in proc.stderr
    assert "pip install 'torch-upgrade-check[history]'" in proc.stderr  # the extra pyproject and docs/cli.md name
    assert "since nightly 2026\\-11\\-12" in (tmp_path / "s.md").read_text()
    assert "charts not drawn" in (tmp_path / "s.md").read_text()
    assert not (tmp_path / "c").exists()
    page = (tmp_path / "page" / "index.html").read_text()
    assert "charts not drawn" in page and "<img" not in page and "class=timeline" in page


def test_publish_is_reached_through_the_cli_and_bad_flags_are_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    """`history publish` runs history/publish.py: without its two flags, one line naming them, exit 2."""
    assert cli.main(["history", "publish", "--store-branch", "history"]) == 2
    err = capsys.readouterr().err
    assert "history publish needs --store-branch BRANCH and --record-from REPORT_JSON" in err
    assert "Traceback" not in err


def test_without_ruptures_first_failures_still_alarm_and_the_missing_steps_are_said(tmp_path: Path) -> None:
    """ruptures is the history extra: without it a step is not looked for, and the summary says so."""
    folder = tmp_path / "store"
    outcomes = [Outcome.PASSED] * 12 + [Outcome.FAILED]
    for r in history_records([*STEPPED[:12], 1.0], outcomes=outcomes):
        store.append(folder, r)
    code = ("import sys; sys.modules['ruptures'] = None\nfrom torch_upgrade_check import cli\n"
            f"sys.exit(cli.main(['history', '--store', {str(folder)!r}, '--alarm-output', {str(tmp_path / 'o')!r}]))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "change points not computed: ruptures is not installed here; pip install 'torch-upgrade-check[history]' "
        "(first failures, flaky and host-only checks are still reported)",
        "mlp[float32]/correctness: failed since nightly 2026-11-13 (last good nightly 2026-11-12)"]
    assert read_github_output((tmp_path / "o").read_text())["alarm"] == "true"


def test_the_missing_charts_hint_names_the_extra_pyproject_declares_and_the_docs_document() -> None:
    """The hint is a command to paste: its extra must exist, bring matplotlib, and be the one docs/cli.md names."""
    extra = re.search(r"torch-upgrade-check\[(\w+)\]", charts.MISSING)
    assert extra, charts.MISSING
    root = Path(__file__).resolve().parents[1]
    declared = tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(spec.startswith("matplotlib") for spec in declared[extra[1]])
    assert f"torch-upgrade-check[{extra[1]}]" in (root / "docs" / "cli.md").read_text()
