"""The deployment programs' typed metrics and rule (pure): export, jit and aoti here, onnx's in its own words
(aspects/onnx/judge.py) on the same steps: built, saved, loaded in a fresh process, and every program's outputs within
the compile rule of eager's.

A program that could not be built (the export or script raised), saved, loaded or run fails with torch's first
line; in `compare` the candidate also loads and runs the program the baseline saved, and a workload that built
on the baseline and no longer builds on the candidate fails saying so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from torch_upgrade_check.analysis import closeness
from torch_upgrade_check.aspects._metrics import Closeness, Judged
from torch_upgrade_check.model import CheckSpec, Outcome

OTHER = ", dynamic_inputs"  # aspects.export.run.OTHER: a program's run on the workload's inputs of other sizes
WHAT = {"export": "torch.export", "aoti": "AOTInductor"}  # jit's names how it was built: TorchScript (trace)


@dataclass(frozen=True)
class Metrics(Closeness):
    """A program's metrics (worker: aspects.export.run; onnx's adds its exporter's), with the compile rule's per
    tensor figures of each program's outputs (named "<program>:<output>") against the fp64 golden."""

    mode: str | None = None  # "compare": the candidate, from the baseline's weights and inputs
    how: str | None = None  # jit: "script" or "trace"; onnx: "dynamo", "legacy" or "default"
    baseline_torch: str | None = None
    baseline_built: bool | None = None
    built: bool | None = None
    build_error: str | None = None
    save_error: str | None = None
    load_errors: Mapping[str, str] | None = None  # by program name
    programs: Sequence[str] | None = None  # "in-process", "reloaded", "baseline's program", ... + OTHER
    dynamic_shapes: bool | None = None


def judge(m: Metrics, spec: CheckSpec) -> Judged:
    """Built, saved, reloaded in a fresh process (in compare the baseline's program loaded too): every output by
    the compile rule against eager's."""
    what = f"TorchScript ({m.how})" if spec.aspect == "jit" else WHAT.get(spec.aspect, spec.aspect)
    failure = not_run(m, what)
    if failure:
        return Judged(Outcome.FAILED, failure, {})
    outcome, reason, thresholds = closeness.judge(m.to_dict(), spec.aspect, spec.dtype)
    baseline = baseline_of(m)
    ran = "built, run, saved and reloaded in a fresh process"
    if m.dynamic_shapes:
        ran = "built with dynamic shapes, run, saved and reloaded in a fresh process, each run on dynamic_inputs too"
    if "baseline's program" in (m.programs or []):
        ran += f"; {baseline}'s saved program loaded and run"
    elif baseline and spec.aspect == "aoti":  # the family's one program that compare does not load across versions
        ran += f" from {baseline}'s weights and inputs (its package is not loaded: torch promises no cross-version load)"
    elif baseline:
        ran += f" ({baseline} built no program to load)" if not m.baseline_built else ""
    return Judged(outcome, f"{what}: {ran}; {reason}", thresholds)


def baseline_of(m: Metrics) -> str:
    """"baseline 2.12.0" in compare (the candidate's check), else ""."""
    return f"baseline {m.baseline_torch}" if m.mode == "compare" else ""


def not_run(m: Metrics, what: str, where: str = "") -> str:
    """Why the `what` program failed before its outputs could be judged: not built, not saved, or not loaded and run
    (`where`: where it is loaded; a fresh process by default); "" when every program ran."""
    baseline = baseline_of(m)
    if not m.built:
        was = f"; it built on {baseline}" if baseline and m.baseline_built else ""
        return f"the {what} program cannot be built: {m.build_error}{was}"
    if m.save_error:
        return f"the {what} program was built but cannot be saved: {m.save_error}"
    errors = dict(m.load_errors or {})
    shown = "; ".join(f"{name}: {why}" for name, why in sorted(errors.items()))
    if errors and all(name.endswith(OTHER) for name in errors):
        return (f"the {what} program does not run on the workload's dynamic_inputs (built with its dynamic_shapes: a "
                f"declared dynamic dimension was specialised): {shown}")
    if errors:
        whose = f" (saved by {baseline})" if "baseline's program" in errors else ""
        return f"the saved {what} program does not load and run {where or f'in a fresh process{whose}'}: {shown}"
    return ""
