"""The ddp aspect in the job summary: fsdp2's columns and torchrun's exit status (pure)."""

from __future__ import annotations

from torch_upgrade_check.aspects.fsdp2.render import COLUMNS as _FSDP2
from torch_upgrade_check.report.columns import DEFAULT_PRIMARY, Column

COLUMNS = (*_FSDP2, Column("torchrun exit", "torchrun_exit"))
PRIMARY = DEFAULT_PRIMARY
