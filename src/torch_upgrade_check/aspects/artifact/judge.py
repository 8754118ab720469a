"""The artifact aspect's typed metrics and rule (pure): a file the team ships (config `artifacts:`) loads with default
arguments and runs, its outputs finite; in compare its outputs are the baseline's within the check's tolerances."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from torch_upgrade_check.analysis.closeness import short
from torch_upgrade_check.aspects._metrics import Judged, Recorded
from torch_upgrade_check.model import CheckSpec, Outcome


@dataclass(frozen=True)
class Metrics(Recorded):
    """A shipped file's metrics (worker: aspects.artifact.run); in compare, its outputs against the baseline's."""

    mode: str | None = None  # "compare": the candidate, against the outputs the baseline saved
    kind: str | None = None  # config.ARTIFACT_KINDS: checkpoint, export, aoti, jit, onnx
    file: str | None = None  # its name
    baseline_torch: str | None = None
    baseline_built: bool | None = None  # the baseline loaded and ran it
    built: bool | None = None  # it loaded and ran here
    build_error: str | None = None
    tensors: int | None = None  # how many output tensors it gave
    nonfinite: Sequence[str] | None = None  # the outputs holding NaN or inf
    rtol: float | None = None
    atol: float | None = None
    per_tensor: Sequence[Mapping[str, Any]] | None = None  # written only where the baseline's outputs were compared
    uncompared: Sequence[str] | None = None
    max_abs_err: float | str | None = None  # "nan", "inf" as report.json writes them


def judge(m: Metrics, spec: CheckSpec | None = None) -> Judged:
    """Loads with default arguments and runs, its outputs finite; in compare, the baseline's within tolerance."""
    what = f"the shipped {m.kind} file {m.file}"
    baseline = f"baseline {m.baseline_torch}"
    if not m.built:
        was = f"; it loaded on {baseline}" if m.baseline_built else ""
        return Judged(Outcome.FAILED, f"{what} does not load and run with default arguments: {m.build_error}{was}", {})
    if m.nonfinite:
        return Judged(Outcome.FAILED, f"{what} loaded but gave NaN or inf in {', '.join(m.nonfinite[:5])}", {})
    if not m.tensors:
        return Judged(Outcome.SUSPICIOUS, f"{what} loads with default arguments but gives no tensor to judge", {})
    if not m.has("per_tensor"):
        if m.mode == "compare":
            return Judged(Outcome.SUSPICIOUS, (f"{what} loads with default arguments and runs ({_tensors(m.tensors)}), "
                                               f"but {baseline} did not load it: nothing to compare with"), {})
        return Judged(Outcome.PASSED, f"{what} loads with default arguments and runs: {_tensors(m.tensors)}", {})
    return _against_baseline(m, what, baseline)


def _against_baseline(m: Metrics, what: str, baseline: str) -> Judged:
    thresholds = {"rtol": m.rtol, "atol": m.atol}
    per_tensor = list(m.per_tensor or [])
    if not per_tensor and not m.uncompared:
        return Judged(Outcome.SUSPICIOUS, f"{what}: no output tensor was compared with {baseline}'s", thresholds)
    if m.uncompared:
        return Judged(Outcome.FAILED, f"{what}: its outputs differ in kind from {baseline}'s: "
                                      f"{', '.join(m.uncompared[:5])}", thresholds)
    bad = [t for t in per_tensor if t.get("mismatched") or t.get("nan")]
    if bad:
        worst = max(bad, key=lambda t: t.get("mismatched") or 0)
        return Judged(Outcome.FAILED, (f"{what} loads but does not reproduce {baseline}'s outputs: {len(bad)} of "
                                       f"{len(per_tensor)} tensors differ; {worst['name']}: {worst.get('mismatched')} "
                                       f"of {worst.get('numel')} elements, max abs err "
                                       f"{short(worst.get('max_abs_err'))}{_relative(worst)} (rtol {m.rtol}, atol "
                                       f"{m.atol})"), thresholds)
    return Judged(Outcome.PASSED, (f"{what} loads with default arguments and reproduces {baseline}'s outputs: "
                                   f"{_tensors(len(per_tensor), 'all ')} within rtol {m.rtol}, atol {m.atol} (max abs "
                                   f"err {short(m.max_abs_err)})"), thresholds)


def _relative(t: Mapping[str, Any]) -> str:
    """", max rel err 0.001": how far off, as a ratio (a loader's x(1+1e-3) reads as 0.001); "" from an older worker."""
    return f", max rel err {short(t['max_rel_err'])}" if "max_rel_err" in t else ""


def _tensors(n: Any, every: str = "") -> str:
    return "one tensor" if n == 1 else f"{every}{n} tensors"
