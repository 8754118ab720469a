"""The determinism aspect in the job summary: how far the two steps are apart, sorted by it (pure)."""

from __future__ import annotations

from torch_upgrade_check.report.columns import Column

COLUMNS = (Column("max abs diff", "max_abs_diff"), Column("bitwise equal", "bitwise_equal"),
           Column("differing tensors", "differing_tensors"))
PRIMARY = Column("max abs diff", "max_abs_diff")
