"""The op-latency aspect in the job summary: the default columns (its table shows outcomes and reasons; what it
names is in the reason and details) (pure)."""

from __future__ import annotations

from torch_upgrade_check.report.columns import CORRECTNESS, DEFAULT_PRIMARY

COLUMNS = CORRECTNESS
PRIMARY = DEFAULT_PRIMARY
