"""The deployment-artifact aspects' rule (export, jit, aoti, onnx): built, saved, loaded in a fresh process, and every
program's outputs within the compile rule of eager's (pure).

A program that could not be built (the export or script raised), saved, loaded or run fails with torch's first
line; in `compare` the candidate also loads and runs the program the baseline saved, and a workload that built
on the baseline and no longer builds on the candidate fails saying so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch_upgrade_check.analysis import closeness
from torch_upgrade_check.model import Outcome

OTHER = ", dynamic_inputs"  # worker.artifacts.OTHER: a program's run on the workload's inputs of other sizes
WHAT = {"export": "torch.export", "jit": "TorchScript", "aoti": "AOTInductor", "onnx": "ONNX"}


def judge(m: Mapping[str, Any], aspect: str, dtype: str) -> tuple[Outcome, str, dict[str, Any]]:
    """The rule; for onnx, a default exporter that changed since the baseline is said, and makes a pass of a call
    that relies on the default (no `dynamo=`) `suspicious`: the team's call now runs another exporter."""
    if aspect == "artifact":
        return _shipped(m)
    outcome, reason, thresholds = _judge(m, aspect, dtype)
    changed = aspect == "onnx" and m.get("mode") == "compare" and m.get("baseline_default_exporter") not in (
        None, m.get("default_exporter"))
    if not changed:
        return outcome, reason, thresholds
    flip = (f"torch.onnx.export's default exporter changed from {m['baseline_default_exporter']} on baseline "
            f"{m.get('baseline_torch')} to {m.get('default_exporter')}")
    if m.get("how") != "default":
        return outcome, f"{reason}; {flip} (your call passes dynamo=, so it is unaffected)", thresholds
    if outcome is Outcome.PASSED:
        return (Outcome.SUSPICIOUS, f"{flip}: your call (no dynamo= argument) now runs the {m.get('default_exporter')} "
                f"exporter; it exported and ran here, but pass dynamo= to keep the exporter you validated; {reason}",
                thresholds)
    return outcome, f"{reason}; {flip}: your call (no dynamo= argument) now runs it", thresholds


def _judge(m: Mapping[str, Any], aspect: str, dtype: str) -> tuple[Outcome, str, dict[str, Any]]:
    what = {"jit": f"TorchScript ({m.get('how')})", "onnx": f"ONNX ({m.get('exporter')} exporter)"}.get(
        aspect, WHAT.get(aspect, aspect))
    baseline = f"baseline {m.get('baseline_torch')}" if m.get("mode") == "compare" else ""
    if not m.get("built"):
        was = f"; it built on {baseline}" if baseline and m.get("baseline_built") else ""
        return Outcome.FAILED, f"the {what} program cannot be built: {m.get('build_error')}{was}", {}
    if m.get("save_error"):
        return Outcome.FAILED, f"the {what} program was built but cannot be saved: {m['save_error']}", {}
    errors = dict(m.get("load_errors") or {})
    if errors and all(name.endswith(OTHER) for name in errors):
        shown = "; ".join(f"{name}: {why}" for name, why in sorted(errors.items()))
        return Outcome.FAILED, (f"the {what} program does not run on the workload's dynamic_inputs (built with its "
                                f"dynamic_shapes: a declared dynamic dimension was specialised): {shown}"), {}
    if errors:
        shown = "; ".join(f"{name}: {why}" for name, why in sorted(errors.items()))
        whose = f" (saved by {baseline})" if "baseline's program" in errors else ""
        where = "in onnxruntime" if aspect == "onnx" else f"in a fresh process{whose}"
        return Outcome.FAILED, f"the saved {what} program does not load and run {where}: {shown}", {}
    outcome, reason, thresholds = closeness.judge(m, aspect, dtype)
    programs = list(m.get("programs") or [])
    if aspect == "onnx":
        against = f" and {baseline}'s eager" if "onnxruntime vs baseline's eager" in programs else ""
        return outcome, (f"{what}: exported, run in onnxruntime {m.get('onnxruntime')} against eager{against}; "
                         f"{reason}"), thresholds
    ran = "built, run, saved and reloaded in a fresh process"
    if m.get("dynamic_shapes"):
        ran = "built with dynamic shapes, run, saved and reloaded in a fresh process, each run on dynamic_inputs too"
    if "baseline's program" in programs:
        ran += f"; {baseline}'s saved program loaded and run"
    elif baseline and aspect == "aoti":
        ran += f" from {baseline}'s weights and inputs (its package is not loaded: torch promises no cross-version load)"
    elif baseline:
        ran += f" ({baseline} built no program to load)" if not m.get("baseline_built") else ""
    return outcome, f"{what}: {ran}; {reason}", thresholds


def _shipped(m: Mapping[str, Any]) -> tuple[Outcome, str, dict[str, Any]]:
    """A file the team ships (config `artifacts:`): it loads with default arguments and runs; in compare its outputs
    are the baseline's within the check's tolerances."""
    what = f"the shipped {m.get('kind')} file {m.get('file')}"
    baseline = f"baseline {m.get('baseline_torch')}"
    if not m.get("built"):
        was = f"; it loaded on {baseline}" if m.get("baseline_built") else ""
        return Outcome.FAILED, f"{what} does not load and run with default arguments: {m.get('build_error')}{was}", {}
    if m.get("nonfinite"):
        return Outcome.FAILED, f"{what} loaded but gave NaN or inf in {', '.join(m['nonfinite'][:5])}", {}
    if not m.get("tensors"):
        return Outcome.SUSPICIOUS, f"{what} loads with default arguments but gives no tensor to judge", {}
    if "per_tensor" not in m:
        if m.get("mode") == "compare":
            return Outcome.SUSPICIOUS, (f"{what} loads with default arguments and runs ({_tensors(m.get('tensors'))}), "
                                        f"but {baseline} did not load it: nothing to compare with"), {}
        return Outcome.PASSED, f"{what} loads with default arguments and runs: {_tensors(m.get('tensors'))}", {}
    thresholds = {"rtol": m.get("rtol"), "atol": m.get("atol")}
    if not m["per_tensor"] and not m.get("uncompared"):
        return Outcome.SUSPICIOUS, f"{what}: no output tensor was compared with {baseline}'s", thresholds
    uncompared = m.get("uncompared") or []
    if uncompared:
        return Outcome.FAILED, f"{what}: its outputs differ in kind from {baseline}'s: {', '.join(uncompared[:5])}", thresholds
    bad = [t for t in m["per_tensor"] if t.get("mismatched") or t.get("nan")]
    if bad:
        worst = max(bad, key=lambda t: t.get("mismatched") or 0)
        return Outcome.FAILED, (f"{what} loads but does not reproduce {baseline}'s outputs: {len(bad)} of "
                                f"{len(m['per_tensor'])} tensors differ; {worst['name']}: {worst.get('mismatched')} of "
                                f"{worst.get('numel')} elements, max abs err {closeness.short(worst.get('max_abs_err'))}"
                                f"{_relative(worst)} (rtol {m.get('rtol')}, atol {m.get('atol')})"), thresholds
    return Outcome.PASSED, (f"{what} loads with default arguments and reproduces {baseline}'s outputs: "
                            f"{_tensors(len(m['per_tensor']), 'all ')} within rtol {m.get('rtol')}, atol {m.get('atol')} (max abs "
                            f"err {closeness.short(m.get('max_abs_err'))})"), thresholds


def _relative(t: Mapping[str, Any]) -> str:
    """", max rel err 0.001": how far off, as a ratio (a loader's x(1+1e-3) reads as 0.001); "" from an older worker."""
    return f", max rel err {closeness.short(t['max_rel_err'])}" if "max_rel_err" in t else ""


def _tensors(n: Any, every: str = "") -> str:
    return "one tensor" if n == 1 else f"{every}{n} tensors"
