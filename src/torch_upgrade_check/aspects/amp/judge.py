"""The amp aspect's typed metrics and rule (pure): per autocast dtype, autocast took effect, the GradScaler skipped
an overflowed step and then applied one, and each tensor of the step within AMP_ROUNDOFFS unit roundoffs (relative
RMS) of the fp64 golden or within closeness.MODEL_MULTIPLIER x the model's own error at that precision
(`model_rmse`); in compare the baseline's golden, within the cross-version rule of the baseline's autocast step, and
the fp64 step's golden unchanged from the baseline's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from torch_upgrade_check.analysis import closeness
from torch_upgrade_check.analysis.closeness import as_float, short
from torch_upgrade_check.aspects._metrics import Judged, Recorded
from torch_upgrade_check.model import CheckSpec, Outcome

# An autocast training step's error, per tensor as RMS(result - golden) / the tensor's scale, in units of the
# autocast dtype's unit roundoff. The built-in workloads' steps show 1 to 13 (a gradient that flows back through
# every layer is the worst); a wrong cast, a gradient left scaled or a dropped accumulation show far more.
AMP_ROUNDOFFS = 64.0
UNIT_ROUNDOFF = {"bfloat16": 2.0**-8, "float16": 2.0**-11}


@dataclass(frozen=True)
class Metrics(Recorded):
    """The amp check's metrics (worker: aspects.amp.run): `checked`, per autocast dtype, what its step showed."""

    checked: Mapping[str, Mapping[str, Any]] | None = None
    not_offered: Mapping[str, str] | None = None
    optimizer: str | None = None
    mode: str | None = None  # "compare": the candidate, against the baseline's steps
    baseline_torch: str | None = None
    fp64_vs_baseline: Mapping[str, Any] | None = None


def judge(m: Metrics, spec: CheckSpec | None = None) -> Judged:
    """Each autocast dtype: took effect, the scaler's overflow handling, the step's error against the golden (and
    in compare against the baseline's autocast step); the first problem fails the check."""
    checked, problems, passed = m.checked or {}, [], []
    thresholds: dict[str, Any] = {"amp_roundoffs": AMP_ROUNDOFFS, "error": "RMS(result - golden) / scale per tensor",
                                  "model_multiplier": closeness.MODEL_MULTIPLIER}
    against = f"baseline {m.baseline_torch}'s" if m.mode == "compare" else ""
    for name, sub in checked.items():
        what = f"{name} autocast" + (" with GradScaler" if "overflow_scale" in sub else "")
        found = _amp_problems(name, sub, against)
        if found:
            problems.append(f"{what}: {found[0]}")
            continue
        worst = max(sub.get("per_tensor") or [{}], key=lambda t: _share_of_amp_bound(t, name))  # nearest its bound
        ratio = as_float(worst.get("rmse")) / (as_float(worst.get("scale")) or 1.0) / UNIT_ROUNDOFF[name]
        own = (f", {as_float(worst['rmse']) / as_float(worst['model_rmse']):.2g}× the model's own {name} rounding error"
               if ratio > AMP_ROUNDOFFS and "model_rmse" in worst else "")
        scaler = (f"; an overflow at scale 2^{int(math.log2(sub['overflow_scale']))} skipped, a step applied at "
                  f"{sub.get('loss_scale'):g}" if "overflow_scale" in sub else "")
        if sub.get("overflow_exercised") is False:
            scaler = (f"; the GradScaler's overflow handling not exercised: the model's float16 gradients stayed "
                      f"finite up to scale 2^{int(math.log2(sub['overflow_scale']))}; a step applied at "
                      f"{sub.get('loss_scale'):g}")
        vs = f", and as close as {against} autocast step" if against else ""
        passed.append(f"{what}: {sub.get('low_precision_modules')} of {sub.get('modules')} modules in {name}; "
                      f"largest error {ratio:.1f} unit roundoffs ({worst.get('name')}){own}{vs}{scaler}")
    offered = "; ".join(f"{k} not offered: {v}" for k, v in (m.not_offered or {}).items())
    tail = f"; {offered}" if offered else ""
    if not checked:
        return Judged(Outcome.FAILED, f"no autocast step ran{tail}", thresholds)
    changed = closeness.fp64_change({"fp64_vs_baseline": m.fp64_vs_baseline})
    if changed:
        problems.append(f"fp64 step: {changed}")
    if problems:
        return Judged(Outcome.FAILED, f"{'; '.join(problems)}{tail}", thresholds)
    optimizer = m.optimizer if m.has("optimizer") else "SGD"
    return Judged(Outcome.PASSED, f"one {optimizer} step each: {'; '.join(passed)}{tail}", thresholds)


def _share_of_amp_bound(t: Mapping[str, Any], name: str) -> float:
    """A tensor's error over what amp allows it: the larger of 64 unit roundoffs of its scale and 4x the model's own."""
    allowed = max(AMP_ROUNDOFFS * UNIT_ROUNDOFF[name] * (as_float(t.get("scale")) or 1.0),
                  closeness.MODEL_MULTIPLIER * as_float(t.get("model_rmse", 0.0)))
    return as_float(t.get("rmse")) / allowed


def _within_own_error(t: Mapping[str, Any]) -> bool:
    """The tensor's error is within MODEL_MULTIPLIER x the model's own at this precision (worker.rounding): a model
    whose output cancels or whose gradients cross many layers amplifies rounding more than 64 unit roundoffs."""
    return "model_rmse" in t and as_float(t.get("rmse")) <= closeness.MODEL_MULTIPLIER * as_float(t["model_rmse"])


def _amp_problems(name: str, sub: Mapping[str, Any], against: str) -> list[str]:
    found = []
    if not sub.get("low_precision_modules"):
        found.append(f"had no effect: none of the model's {sub.get('modules')} modules produced {name} (torch may "
                     f"have disabled autocast for this device and dtype; the warnings check shows its warning)")
    if "overflow_scale" in sub:
        exercised = sub.get("overflow_exercised") is not False  # nothing overflowed: said in the reason, not failed
        if exercised and not sub.get("overflow_skipped"):
            finite = "" if sub.get("weights_finite_after_overflow") else ", and the weights are no longer finite"
            found.append(f"the GradScaler applied a step whose float16 gradients overflowed (loss scale "
                         f"{sub['overflow_scale']:g}){finite}")
        elif exercised and not sub.get("overflow_backed_off"):
            found.append("the GradScaler skipped an overflowed step but did not lower its scale")
        if not sub.get("scaled_step_applied"):
            found.append(f"no step was applied in {sub.get('scaled_attempts')} tries (the loss scale halved each time, "
                         f"down to {sub.get('loss_scale'):g})")
    if sub.get("nan_count"):
        found.append(f"{sub['nan_count']} NaN values in the step's outputs, gradients or weights")
    unit = UNIT_ROUNDOFF[name]
    for t in sub.get("per_tensor") or []:
        error = as_float(t.get("rmse")) / (as_float(t.get("scale")) or 1.0)
        if not error <= AMP_ROUNDOFFS * unit and not _within_own_error(t):
            own = (f" and {short(as_float(t['rmse']) / as_float(t['model_rmse']))}× the model's own {name} rounding "
                   f"error (at most {closeness.MODEL_MULTIPLIER:g}×)" if "model_rmse" in t else "")
            if sub.get("no_yardstick"):
                own = f"; the model's own {name} rounding error could not be computed ({sub['no_yardstick']})"
            found.append(f"{t['name']}: error {short(error)} of its scale, {short(error / unit)} unit roundoffs of "
                         f"{name} (at most {AMP_ROUNDOFFS:g}){own}")
            break
    if against:
        for t in sub.get("per_tensor") or []:
            ok, why = closeness.judge_tensor(t, "cross-version", name, as_float(sub.get("rtol")), as_float(sub.get("atol")))
            if not ok:
                found.append(f"further from the fp64 golden than {against} autocast step: {why}")
                break
    if sub.get("uncompared"):
        found.append(f"tensors without a golden: {', '.join(sub['uncompared'][:3])}")
    if not sub.get("per_tensor"):
        found.append("nothing was compared with the golden")
    return found
