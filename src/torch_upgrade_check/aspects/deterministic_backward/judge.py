"""deterministic-backward is judged by the determinism family's rule and metrics (pure)."""

from __future__ import annotations

from torch_upgrade_check.aspects.determinism.judge import Metrics, judge

__all__ = ["Metrics", "judge"]
