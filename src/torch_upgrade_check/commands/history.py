"""The `history` command: append a run's record, read the store, say what changed, draw it, raise the alarm.

`history publish` is history/publish.py's (it commits the store to a branch and pushes, retrying on a rejection).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from torch_upgrade_check import github
from torch_upgrade_check.analysis.trends import History, analyse, summary_lines
from torch_upgrade_check.commands.settings import HistorySettings
from torch_upgrade_check.errors import EXIT_PASSED, UsageError
from torch_upgrade_check.history import charts, page, publish, record, store
from torch_upgrade_check.orchestrate.workers import InfrastructureError
from torch_upgrade_check.report.history import alarm_outputs, render_markdown, to_document
from torch_upgrade_check.schema import atomic_write_text


def execute(s: HistorySettings) -> int:
    if s.action == "publish":
        return _publish(s)
    if not s.store:
        raise UsageError("history needs --store DIR, the folder of the history store (records.jsonl)")
    folder = Path(s.store)
    if s.append:
        made = record.from_file(Path(s.append), commit=s.commit)
        with _writing("the history store", folder):
            store.append(folder, made)
    elif not folder.is_dir():
        raise UsageError(f"history store {folder} does not exist; pass the store's folder, or --append a report.json "
                         "to start one")
    got = store.load(folder)
    for problem in got.problems:
        print(f"torch-upgrade-check: warning: {problem}", file=sys.stderr)
    history = analyse(got.records)
    if not s.markdown:  # docs/cli.md: the lines go to stdout unless --markdown takes them
        for line in summary_lines(history) or ["no check changed: no step, no new failure"]:
            print(line)
    _write(s, history, got.problems)
    if (s.charts or s.html) and not charts.available():
        print(f"torch-upgrade-check: {charts.MISSING}", file=sys.stderr)
    return EXIT_PASSED  # an alarm is news, not a failure of `history`: the workflow reads alarm=


def _write(s: HistorySettings, history: History, problems: list[str]) -> None:
    """Every file asked for; one that cannot be written is an infrastructure error naming it (exit 3)."""
    drawn: dict[str, str] = {}
    if s.charts:
        with _writing("--charts", Path(s.charts)):
            drawn = charts.draw_all(history, Path(s.charts), [f.check for f in history.findings])
    if s.markdown:
        missing = charts.MISSING if s.charts and not charts.available() else ""
        with _writing("--markdown", Path(s.markdown)):
            atomic_write_text(Path(s.markdown), render_markdown(history, drawn, charts_missing=missing))
    if s.html:
        with _writing("--html", Path(s.html)):
            page.write(history, Path(s.html))
    if s.json:
        with _writing("--json", Path(s.json)):
            atomic_write_text(Path(s.json), json.dumps(to_document(history, problems), indent=2) + "\n")
    if s.alarm_output:
        with _writing("--alarm-output", Path(s.alarm_output)):
            github.write_outputs(Path(s.alarm_output), alarm_outputs(history))


@contextmanager
def _writing(what: str, path: Path) -> Iterator[None]:
    """An OSError inside is the runner's (a full disk, a read-only folder): one line naming the file and why."""
    try:
        yield
    except OSError as e:
        where = e.filename or path
        raise InfrastructureError(f"history could not write {what} {where}: {e.strerror or e}") from None


def _publish(s: HistorySettings) -> int:
    return int(publish.main(s))
