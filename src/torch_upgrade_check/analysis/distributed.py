"""compare's candidate of a distributed check (fsdp2, ddp) against the baseline's steps (pure): each step's global
loss and reduced gradients, and the parameters after the steps, by the cross-version rule (analysis.closeness): the
baseline's fp64 golden the yardstick and the baseline's own error its noise floor; the candidate's own fp64 golden
unchanged from the baseline's. A torch that changes the wrapped and the unsharded model alike (a kernel both call)
passes the comparison with the unsharded model and fails this one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch_upgrade_check.analysis import closeness
from torch_upgrade_check.model import Outcome


def against_baseline(m: Mapping[str, Any], model: str, dtype: str) -> tuple[bool, str, dict[str, Any]]:
    """(passed, what it says, its thresholds): `model` names the wrapped model ("DDP", "sharded"). Nothing compared
    (the baseline saved no steps, or an old worker) fails: a candidate compare judged on its own is not judged."""
    sub = m.get("vs_baseline")
    if not isinstance(sub, Mapping):
        why = m.get("baseline_missing") or "the worker reported no comparison"
        return False, f"not compared with the baseline's {model} steps: {why}", {}
    outcome, why, thresholds = closeness.judge(sub, "cross-version", dtype)
    changed = closeness.fp64_change(sub)
    against = f"baseline {sub.get('baseline_torch')}'s"
    if outcome is Outcome.PASSED and not changed:
        return True, f"its losses, gradients and parameters as close to the fp64 golden as {against}: {why}", thresholds
    return False, (f"the {model} model's losses, gradients or parameters differ from {against} {model} steps: "
                   f"{'; '.join(x for x in (why if outcome is not Outcome.PASSED else '', changed) if x)}"), thresholds
