"""Whether computed tensors are close enough to their fp64 golden: judged tensor by tensor (pure).

The worker sends, per tensor (outputs and `grad:*` gradients), its tolerance scale (RMS of the golden,
never below GRAD_SCALE_FLOOR x the largest gradient's for gradients), the count of elements outside
`atol*scale + rtol*|golden|`, its RMSE against the golden, and where available the RMSE of a trusted
reference (`ref_rmse`), the dtype's own rounding error of the golden (`floor_rmse`) and the model's own rounding
error at the dtype (`model_rmse`).

A NaN where the golden has NaN is equal (torch.testing.assert_close(equal_nan=True)), and said in the reason; NaN on
one side only fails, named. A tensor passes when every element is within tolerance; when rtol = atol = 0 (bitwise equality), also
when it equals its reference bitwise (the baseline's output, the CPU's, eager's); or else, with tolerances:
- for a tensor the reference has: RMSE at most MULTIPLIER x the reference's RMSE (+ atol*scale/10).
  The reference is the CPU (cross-backend), the baseline torch (cross-version: there the golden is the
  baseline's fp64 golden too, so a kernel changed in every dtype cannot move the yardstick), eager (compile) in
  the same dtype, or for tf32 numerics the CPU with TF32 operand rounding simulated:
  torch._dynamo's `same(fp64_ref=...)` rule, so harmless reorderings pass and a real loss of
  accuracy fails;
- otherwise, in low precision (float16, bfloat16, tf32): RMSE at most LOWP_MULTIPLIER x the dtype's
  rounding error of the golden (+ atol*scale/10): low precision cannot meet fp64-derived elementwise
  tolerances, so its error is judged against its noise floor;
- and, in any dtype, where the worker measured it (`model_rmse`: the golden recomputed with every op perturbed as
  the dtype rounds, worker.rounding): RMSE at most MODEL_MULTIPLIER x the model's own rounding error, which grows
  with the model's depth and accumulation lengths as the real error does.
A check passes when every tensor passes, and fails when a tensor was produced and never compared.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from torch_upgrade_check.model import Outcome

MULTIPLIER = 2.0
LOWP_MULTIPLIER = 4.0
# numerics without a reference: a tensor's RMSE may be this many times the model's own rounding error (the fp64
# golden recomputed with every op perturbed as the dtype rounds, u·√K for an op that sums K terms: worker.rounding).
# Healthy torches on real models (timm, torchvision, transformers) show at most 0.5x; a 0.1% kernel change in float32
# shows hundreds of times (docs/benchmarks.md#numerics-and-amp-bounds-on-real-models).
MODEL_MULTIPLIER = 4.0
LOW_PRECISION = ("float16", "bfloat16", "tf32")
REFERENCE = {"cross-backend": "the CPU", "cross-version": "the baseline", "compile": "eager",
             "numerics": "TF32 simulated on the CPU",
             "export": "eager", "jit": "eager", "aoti": "eager", "onnx": "eager"}  # numerics has a reference only for tf32


def judge_tensor(t: Mapping[str, Any], aspect: str, dtype: str, rtol: float, atol: float) -> tuple[bool, str]:
    """(passed, why) for one tensor's metrics."""
    name, scale = t["name"], as_float(t.get("scale")) or 1.0
    slack = atol * scale / 10
    if t.get("nan"):
        return False, f"{name}: {t['nan']} NaN where the golden has numbers"
    if t.get("nan_in_golden_only"):
        return False, f"{name}: {t['nan_in_golden_only']} numbers where the golden has NaN"
    if not t.get("mismatched"):
        return True, f"{name}: all {t['numel']} within tolerance (max abs err {short(t.get('max_abs_err'))})"
    outside = (f"{name}: {t['mismatched']} of {t['numel']} elements outside atol·scale + rtol·|golden| "
               f"(max abs err {short(t.get('max_abs_err'))}, scale {short(scale)})")
    if rtol == 0 and atol == 0:
        if aspect in REFERENCE and t.get("ref_equal"):
            return True, f"{name}: bitwise equal to {REFERENCE[aspect]}'s (rtol = atol = 0)"
        return False, f"{outside}; rtol = atol = 0 asks for bitwise equality"
    rmse = as_float(t.get("rmse"))
    if aspect in REFERENCE and "ref_rmse" in t:
        ref = as_float(t["ref_rmse"])
        bound = MULTIPLIER * ref + slack
        ok = rmse <= bound
        return ok, (f"{name}: rmse {short(rmse)} {'≤' if ok else '>'} {MULTIPLIER:g}× {REFERENCE[aspect]}'s {short(ref)}"
                    f"{'' if ok else '; ' + outside.split(': ', 1)[1]}")
    rules = []  # (passed, the bound in words): the first that passes, else the last, is named
    if dtype in LOW_PRECISION and "floor_rmse" in t:
        floor = as_float(t["floor_rmse"])
        rules.append((rmse <= LOWP_MULTIPLIER * floor + slack, f"{LOWP_MULTIPLIER:g}× {dtype} rounding error {short(floor)}"))
    if "model_rmse" in t:
        model = as_float(t["model_rmse"])
        rules.append((rmse <= MODEL_MULTIPLIER * model + slack,
                      f"{MODEL_MULTIPLIER:g}× the model's own {dtype} rounding error {short(model)}"))
    if not rules:
        return False, outside
    ok, bound = next(((ok, b) for ok, b in rules if ok), rules[-1])
    return ok, f"{name}: rmse {short(rmse)} {'≤' if ok else '>'} {bound}{'' if ok else '; ' + outside.split(': ', 1)[1]}"


def judge(m: Mapping[str, Any], aspect: str, dtype: str) -> tuple[Outcome, str, dict[str, Any]]:
    """The check's outcome, its one-line reason and the thresholds used."""
    rtol, atol = as_float(m.get("rtol")), as_float(m.get("atol"))
    thresholds: dict[str, Any] = {"rtol": rtol, "atol": atol, "atol_scaled_by": "each tensor's RMS"}
    if aspect in REFERENCE:
        thresholds["multiplier"] = MULTIPLIER
    if dtype in LOW_PRECISION:
        thresholds["lowp_multiplier"] = LOWP_MULTIPLIER
    if any("model_rmse" in t for t in m.get("per_tensor") or []):
        thresholds["model_multiplier"] = MODEL_MULTIPLIER
    tensors = list(m.get("per_tensor") or [])
    verdicts = [(t, *judge_tensor(t, aspect, dtype, rtol, atol)) for t in tensors]
    failed = [(t, why) for t, ok, why in verdicts if not ok]
    notes = _notes(m)
    uncompared = list(m.get("uncompared") or [])
    if not tensors:
        return Outcome.FAILED, "nothing was compared: the workload produced no tensor that the golden has" + notes, thresholds
    if failed:
        worst = max(failed, key=lambda x: (bool(x[0].get("nan")),
                                           as_float(x[0].get("rmse")) / (as_float(x[0].get("scale")) or 1.0)))
        return Outcome.FAILED, f"{len(failed)} of {len(tensors)} tensors differ; worst {worst[1]}{notes}", thresholds
    if uncompared:
        shown = ", ".join(uncompared[:3]) + (f" and {len(uncompared) - 3} more" if len(uncompared) > 3 else "")
        return (Outcome.FAILED, f"{len(uncompared)} tensors were produced but not compared (no counterpart): {shown}"
                + notes, thresholds)
    close = [why for t, ok, why in verdicts if t.get("mismatched")]
    how = f"; nearest the bound: {close[0]}" if close else f" (max abs err {short(m.get('max_abs_err'))})"
    every = "the one tensor is" if len(tensors) == 1 else f"all {len(tensors)} tensors are"
    return Outcome.PASSED, f"{every} within tolerance{how}{_equal_nan(tensors)}{notes}", thresholds


def _equal_nan(tensors: list[Mapping[str, Any]]) -> str:
    """NaN the golden has too, in the same places (a fully masked attention row), passed as equal: said, not hidden."""
    n = sum(int(t.get("nan_as_golden") or 0) for t in tensors)
    return (f"; {n} NaN where the golden has NaN, equal as torch.testing.assert_close(equal_nan=True) has it"
            if n else "")


def fp64_change(m: Mapping[str, Any]) -> str:
    """What changed in this torch's fp64 golden against the baseline's (cross-version and amp in compare), or "":
    beyond float64's tolerances the two torches compute different functions, whatever the dtype under test does."""
    sub = m.get("fp64_vs_baseline") or {}
    if not sub.get("mismatched_count") and not sub.get("uncompared"):
        return ""
    if not sub.get("mismatched_count"):
        return f"the fp64 golden has tensors the baseline's has not, or lacks some: {', '.join(sub['uncompared'][:3])}"
    return (f"the fp64 golden itself changed: {sub['mismatched_count']} of {sub.get('numel')} elements differ from "
            f"the baseline's beyond rtol = atol = {short(sub.get('rtol'))} (worst {sub.get('worst')}, max abs err "
            f"{short(sub.get('max_abs_err'))}, max rel err {short(sub.get('max_rel_err'))}): this torch computes a "
            f"different function")


def _notes(m: Mapping[str, Any]) -> str:
    parts = [f"{what} not checked: {why}" for what, why in (m.get("not_checked") or {}).items()]
    parts += [f"{what} {why}" for what, why in (m.get("no_reference") or {}).items()]
    if m.get("no_yardstick"):
        parts.append(f"the model's own rounding error could not be computed ({m['no_yardstick']}): rtol/atol alone")
    return "".join(f"; {p}" for p in parts)


def as_float(value: Any) -> float:
    """A metric as a float; NaN when it is missing or not a number."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def short(value: Any) -> str:
    """A metric in three significant digits, or as it is when it is not a number."""
    v = as_float(value)
    return f"{v:.3g}" if not math.isnan(v) else str(value)


def plural_of(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")
