"""The resolve aspect in the job summary: the correctness columns (none of them filled: the reason names the
packages), the default sort (pure)."""

from __future__ import annotations

from torch_upgrade_check.report.columns import CORRECTNESS, DEFAULT_PRIMARY

COLUMNS = CORRECTNESS
PRIMARY = DEFAULT_PRIMARY
