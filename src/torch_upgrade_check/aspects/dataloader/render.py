"""The dataloader aspect in the job summary: its table's columns and the figure it sorts by (pure)."""

from __future__ import annotations

from torch_upgrade_check.report.columns import DEFAULT_PRIMARY, Column

COLUMNS = (Column("loaders", "runs", "count"), Column("workers", "workers"),
           Column("reference batches", "reference_batches"), Column("pin_memory", "pin_memory"))
PRIMARY = DEFAULT_PRIMARY
