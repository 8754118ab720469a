"""The onnx aspect's typed metrics and rule (pure): the deployment programs' steps (aspects/export/judge.py) in
onnxruntime, and in compare a default exporter that changed since the baseline said, and a pass of a call that relies
on the default (no `dynamo=`) made `suspicious`: the team's call now runs another exporter."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch_upgrade_check.analysis import closeness
from torch_upgrade_check.aspects._metrics import Judged
from torch_upgrade_check.aspects.export import judge as programs
from torch_upgrade_check.model import CheckSpec, Outcome


@dataclass(frozen=True)
class Metrics(programs.Metrics):
    """An ONNX export's metrics (worker: aspects.onnx.run): a program's, with the exporter it ran and the default."""

    exporter: str | None = None  # "dynamo" or "legacy": what ran
    default_exporter: str | None = None  # what torch.onnx.export runs without dynamo= in this torch
    baseline_default_exporter: str | None = None
    onnxruntime: str | None = None  # its version


def judge(m: Metrics, spec: CheckSpec) -> Judged:
    """Exported and run in onnxruntime against eager; in compare, the default exporter's change since the baseline."""
    outcome, reason, thresholds = _exported(m, spec)
    changed = m.mode == "compare" and m.baseline_default_exporter not in (None, m.default_exporter)
    if not changed:
        return Judged(outcome, reason, thresholds)
    flip = (f"torch.onnx.export's default exporter changed from {m.baseline_default_exporter} on baseline "
            f"{m.baseline_torch} to {m.default_exporter}")
    if m.how != "default":
        return Judged(outcome, f"{reason}; {flip} (your call passes dynamo=, so it is unaffected)", thresholds)
    if outcome is Outcome.PASSED:
        return Judged(Outcome.SUSPICIOUS, f"{flip}: your call (no dynamo= argument) now runs the {m.default_exporter} "
                                          f"exporter; it exported and ran here, but pass dynamo= to keep the exporter you "
                                          f"validated; {reason}", thresholds)
    return Judged(outcome, f"{reason}; {flip}: your call (no dynamo= argument) now runs it", thresholds)


def _exported(m: Metrics, spec: CheckSpec) -> tuple[Outcome, str, dict[str, Any]]:
    what = f"ONNX ({m.exporter} exporter)"
    failure = programs.not_run(m, what, where="in onnxruntime")
    if failure:
        return Outcome.FAILED, failure, {}
    outcome, reason, thresholds = closeness.judge(m.to_dict(), spec.aspect, spec.dtype)
    baseline = programs.baseline_of(m)
    against = f" and {baseline}'s eager" if "onnxruntime vs baseline's eager" in (m.programs or []) else ""
    return outcome, f"{what}: exported, run in onnxruntime {m.onnxruntime} against eager{against}; {reason}", thresholds
