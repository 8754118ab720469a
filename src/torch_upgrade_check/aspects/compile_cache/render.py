"""The compile-cache aspect in the job summary: both processes' compile times, the rule and what differed; sorted by
the warm compile's time (pure)."""

from __future__ import annotations

from torch_upgrade_check.report.columns import Column

PRIMARY = Column("warm compile", "warm_compile_s", "s")
COLUMNS = (Column("cold compile", "cold_compile_s", "s"), PRIMARY, Column("rule", "rule"),
           Column("differing tensors", "differing_tensors"))
