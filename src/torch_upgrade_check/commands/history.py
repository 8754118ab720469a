"""The `history` command: append a run's record, read the store, say what changed, draw it, raise the alarm.

`history publish` is history/publish.py's (it commits the store to a branch and pushes, retrying on a rejection).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from torch_upgrade_check.analysis.trends import History, analyse, summary_lines
from torch_upgrade_check.commands.settings import HistorySettings
from torch_upgrade_check.errors import EXIT_PASSED, UsageError
from torch_upgrade_check.history import charts, page, publish, record, store
from torch_upgrade_check.report.history import alarm_outputs, render_markdown, to_document
from torch_upgrade_check.schema import atomic_write_text


def execute(s: HistorySettings) -> int:
    if s.action == "publish":
        return _publish(s)
    if not s.store:
        raise UsageError("history needs --store DIR, the folder of the history store (records.jsonl)")
    folder = Path(s.store)
    if s.append:
        store.append(folder, _record(Path(s.append), s.commit))
    elif not folder.is_dir():
        raise UsageError(f"history store {folder} does not exist; pass the store's folder, or --append a report.json "
                         "to start one")
    got = store.load(folder)
    for problem in got.problems:
        print(f"torch-upgrade-check: warning: {problem}", file=sys.stderr)
    history = analyse(got.records)
    for line in summary_lines(history) or ["no check changed: no step, no new failure"]:
        print(line)
    drawn = _charts(history, Path(s.charts)) if s.charts else {}
    if s.markdown:
        missing = charts.MISSING if s.charts and not charts.available() else ""
        atomic_write_text(Path(s.markdown), render_markdown(history, drawn, charts_missing=missing))
    if s.html:
        page.write(history, Path(s.html))
    if s.json:
        atomic_write_text(Path(s.json), json.dumps(to_document(history, got.problems), indent=2) + "\n")
    if s.alarm_output:
        _append_outputs(Path(s.alarm_output), alarm_outputs(history))
    if (s.charts or s.html) and not charts.available():
        print(f"torch-upgrade-check: {charts.MISSING}", file=sys.stderr)
    return EXIT_PASSED  # an alarm is news, not a failure of `history`: the workflow reads alarm=


def _record(path: Path, commit: str | None) -> dict:
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise UsageError(f"cannot read --append {path}: {e.strerror}; pass the report.json that run or compare wrote") from None
    except json.JSONDecodeError as e:
        raise UsageError(f"--append {path} is not JSON ({e.msg} at line {e.lineno}); pass the report.json that run "
                         "or compare wrote") from None
    sha = commit if commit is not None else os.environ.get("GITHUB_SHA", "")
    return record.from_report(report, identity=record.runner_identity(), commit=sha, when=record.now_utc())


def _charts(history: History, folder: Path) -> dict[str, str]:
    """A PNG per check with a finding (the summary links them by name); {} without matplotlib."""
    if not charts.available():
        return {}
    drawn = {}
    for finding in history.findings:
        name = charts.file_name(finding.check)
        charts.draw(history.series[finding.check], finding.check, folder / name, finding=finding)
        drawn[finding.check] = name
    return drawn


def _append_outputs(path: Path, outputs: dict[str, str]) -> None:
    """GitHub's output file is appended to, one name=value a line (the values never hold a newline)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write("".join(f"{k}={v}\n" for k, v in outputs.items()))


def _publish(s: HistorySettings) -> int:
    return int(publish.main(s))
