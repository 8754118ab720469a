"""The compile-time aspect in the job summary: the cold compiles' median, spread and count; in a comparison's "What
changed", its title and the median a single run kept (pure)."""

from __future__ import annotations

from torch_upgrade_check.report.columns import Column

PRIMARY = Column("median", "median_ms", "ms")
COLUMNS = (PRIMARY, Column("IQR", "iqr_ms", "ms"), Column("compiles", "samples_ms", "count"))
TITLE = "Cold compile time"
MEDIAN = PRIMARY
