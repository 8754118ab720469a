"""The `report` command: junit.xml and summary.md rendered again from a saved report.json."""

from __future__ import annotations

import os
from pathlib import Path

from torch_upgrade_check.commands.common import exit_code
from torch_upgrade_check.commands.settings import ReportSettings
from torch_upgrade_check.model import FAIL_ON
from torch_upgrade_check.schema import read_reports


def execute(s: ReportSettings) -> int:
    from torch_upgrade_check import github

    reports = read_reports(Path(s.report))
    github.publish(reports, Path(s.report).parent, environ=os.environ, report_path=Path(s.report),
                   junit_path=Path(s.junit) if s.junit else None,
                   summary_path=Path(s.summary) if s.summary else None)
    return exit_code(reports, frozenset(FAIL_ON))
