"""The compiled-latency aspect in the job summary: latency's columns, the compile in place of the threads (pure)."""

from __future__ import annotations

from torch_upgrade_check.report.columns import Column

PRIMARY = Column("median", "median_ms", "ms")
COLUMNS = (PRIMARY, Column("IQR", "iqr_ms", "ms"), Column("samples", "samples_ms", "count"),
           Column("compile", "compile_s", "s"))
TITLE = "Compiled latency"
MEDIAN = PRIMARY
