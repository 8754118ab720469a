"""The fsdp2 aspect in the job summary: the parameters' largest error, the ranks and their backend (pure)."""

from __future__ import annotations

from torch_upgrade_check.report.columns import DEFAULT_PRIMARY, Column

COLUMNS = (Column("max abs err", "max_abs_err"), Column("world size", "world_size"), Column("backend", "backend"))
PRIMARY = DEFAULT_PRIMARY
