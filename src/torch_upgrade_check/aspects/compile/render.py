"""The compile family in the job summary: the compile time, then the correctness columns; sorted by the compile
time (pure)."""

from __future__ import annotations

from torch_upgrade_check.report.columns import CORRECTNESS, Column

PRIMARY = Column("compile", "compile_time_s", "s")
COLUMNS = (PRIMARY, *CORRECTNESS)
