"""The `merge` command: reports from several runners (and runners that left none) into one summary and JUnit file."""

from __future__ import annotations

from pathlib import Path

from torch_upgrade_check import runner_status
from torch_upgrade_check.commands.common import finish
from torch_upgrade_check.commands.settings import MergeSettings
from torch_upgrade_check.errors import UsageError
from torch_upgrade_check.schema import read_reports


def execute(s: MergeSettings) -> int:
    expected = runner_status.parse_runners(s.runners) if s.runners is not None else None
    statuses = [runner_status.read_status(Path(p)) for p in s.runner_status]
    beside = {Path(p).resolve().parent: status for p, status in zip(s.runner_status, statuses)}
    reports = []
    for p in s.reports:  # a status beside a report is its runner's: a GPU runner whose checks ran on the CPU fails
        status = beside.get(Path(p).resolve().parent)
        reports += [runner_status.on_the_cpu(status, r) if status else r for r in read_reports(Path(p))]
    reports += runner_status.missing_reports(statuses, expected)
    if not reports:
        raise UsageError("merge found nothing to merge: no report.json given, and every runner status says its "
                         "report exists; pass the report.json files too")
    return finish(s.output, reports, None, 0.0)
