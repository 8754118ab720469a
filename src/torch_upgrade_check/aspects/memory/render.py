"""The memory aspect in the job summary: the peak and the counter that read it; in a comparison's "What changed",
its title and the peak a single run kept (pure)."""

from __future__ import annotations

from torch_upgrade_check.report.columns import Column

PRIMARY = Column("peak", "peak_bytes", "bytes")
COLUMNS = (PRIMARY, Column("API", "memory_api"))
TITLE = "Peak memory"
MEDIAN = PRIMARY
