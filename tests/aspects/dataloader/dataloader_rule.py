"""The dataloader tests' way to the rule: a worker's dict read through the aspect's typed Metrics."""

from __future__ import annotations

from typing import Any

from torch_upgrade_check.aspects.dataloader.judge import Metrics
from torch_upgrade_check.aspects.dataloader.judge import judge as judge_metrics


def judge(m: dict[str, Any]) -> tuple[Any, str, dict[str, Any]]:
    """The rule on a worker's dict, read through Metrics (which must write it back unchanged, key order too): its
    outcome, reason and thresholds."""
    metrics = Metrics.from_dict(m)
    assert metrics.to_dict() == m and list(metrics.to_dict()) == list(m)
    judged = judge_metrics(metrics)
    assert not judged.derived
    return judged.outcome, judged.reason, judged.thresholds
