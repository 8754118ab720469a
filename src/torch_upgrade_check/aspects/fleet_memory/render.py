"""The fleet-memory aspect in the job summary: the correctness columns (none of them filled: the reason says it all),
the default sort (pure)."""

from __future__ import annotations

from torch_upgrade_check.report.columns import CORRECTNESS, DEFAULT_PRIMARY

COLUMNS = CORRECTNESS
PRIMARY = DEFAULT_PRIMARY
