"""The numerics aspect in the job summary: the correctness columns, sorted by the largest absolute error (pure)."""

from __future__ import annotations

from torch_upgrade_check.report.columns import CORRECTNESS, DEFAULT_PRIMARY

COLUMNS = CORRECTNESS
PRIMARY = DEFAULT_PRIMARY
