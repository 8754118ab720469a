"""The latency aspect in the job summary: the median of its samples, their spread and count, the threads; in a
comparison's "What changed", its title and the median a single run kept (pure)."""

from __future__ import annotations

from torch_upgrade_check.report.columns import Column

PRIMARY = Column("median", "median_ms", "ms")
COLUMNS = (PRIMARY, Column("IQR", "iqr_ms", "ms"), Column("samples", "samples_ms", "count"), Column("threads", "threads"))
TITLE = "Latency"
MEDIAN = PRIMARY
