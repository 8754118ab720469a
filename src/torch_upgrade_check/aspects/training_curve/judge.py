"""The training-curve aspect's typed metrics and rule (pure): finite losses; in compare every step within the band
around the baseline's curve; a failure says first when the seeded random stream changed (worker.randomness), which
explains it without numerics.

The band: the candidate's loss at each step stays within CURVE_BAND_K times the largest difference two runs of the
same torch have shown up to that step (the device's nondeterminism), and never narrower than CURVE_RTOL of the
largest |loss| of the baseline's so far (what a new release's rounding alone does to a short training run; the
loss's scale, not its value, which may cross zero).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from torch_upgrade_check.analysis.closeness import short
from torch_upgrade_check.aspects._metrics import Judged, Recorded
from torch_upgrade_check.aspects._training import random_stream_line
from torch_upgrade_check.model import CheckSpec, Outcome

CURVE_BAND_K = 4.0
CURVE_RTOL = 1e-3


@dataclass(frozen=True)
class Metrics(Recorded):
    """The training-curve check's metrics (worker: aspects.training_curve.run); a None loss is NaN or infinite."""

    losses: Sequence[float | None] | None = None
    second_run: Sequence[float | None] | None = None
    mode: str | None = None  # "compare": the candidate, with the baseline's curves
    baseline_losses: Sequence[float | None] | None = None
    baseline_second_run: Sequence[float | None] | None = None
    random_stream_changed: Mapping[str, Any] | None = None


def judge(m: Metrics, spec: CheckSpec | None = None) -> Judged:
    """The rule above; in compare the result also records the deviation nearest the band's edge, and where the curve
    first left it."""
    losses, again = list(m.losses or []), list(m.second_run or [])
    steps, thresholds = len(losses), {"band_k": CURVE_BAND_K, "curve_rtol": CURVE_RTOL}
    broken = next((i for i, x in enumerate([*losses, *again]) if x is None), None)
    if not losses or broken is not None:
        where = f" from step {broken % steps + 1} of {steps}" if broken is not None and steps else ""
        return Judged(Outcome.FAILED, f"the training loss is NaN or infinite{where}", thresholds)
    if m.mode != "compare":
        spread = max((abs(a - b) for a, b in zip(losses, again)), default=0.0)
        second = "a second run is bitwise equal" if spread == 0 else f"a second run differs by up to {short(spread)}"
        return Judged(Outcome.PASSED, f"{steps} AdamW steps: loss {losses[0]:.6g} → {losses[-1]:.6g}; {second}",
                      thresholds)
    base, base2 = list(m.baseline_losses or []), list(m.baseline_second_run or [])
    if len(base) != steps or any(x is None for x in [*base, *base2]):
        return Judged(Outcome.SKIPPED, "the baseline's curve is not finite or not as long: its own check says why",
                      thresholds)
    return _against_baseline(m, losses, again, base, base2, thresholds)


def _against_baseline(m: Metrics, losses: list[float], again: list[float], base: list[float], base2: list[float],
                      thresholds: dict[str, Any]) -> Judged:
    steps = len(losses)
    widest, scale, first_out = 0.0, 0.0, None
    closest = (-1.0, 0, 0.0, 0.0)  # (deviation / band, step index, deviation, band): the step nearest the edge
    for i, (c, b) in enumerate(zip(losses, base)):
        widest = max(widest, abs(b - base2[i]), abs(c - again[i]))
        scale = max(scale, abs(b))
        band = max(CURVE_BAND_K * widest, CURVE_RTOL * scale)
        deviation = abs(c - b)
        ratio = deviation / band if band else (math.inf if deviation else 0.0)
        if ratio > closest[0]:
            closest = (ratio, i, deviation, band)
        if first_out is None and deviation > band:
            first_out = (i, c, b, band)
    worst = (closest[2], closest[1], closest[3])
    derived: dict[str, Any] = {"max_deviation": worst[0], "max_deviation_step": worst[1] + 1}
    if first_out is not None:
        i, c, b, band = first_out
        derived["first_step_out"] = i + 1
        return Judged(Outcome.FAILED, (f"{random_stream_line(m.random_stream_changed)}the candidate's loss leaves the "
                                       f"baseline's band at step {i + 1} of {steps}: {c:.6g} vs {b:.6g} (band "
                                       f"±{short(band)}); at step {steps}: {losses[-1]:.6g} vs {base[-1]:.6g}"),
                      thresholds, derived)
    if worst[0] == 0:
        return Judged(Outcome.PASSED, f"the candidate's {steps}-step loss curve is bitwise the baseline's", thresholds,
                      derived)
    return Judged(Outcome.PASSED, (f"the candidate's {steps}-step loss curve stays within the baseline's band (closest "
                                   f"to its edge at step {worst[1] + 1}: deviation {short(worst[0])}, band "
                                   f"±{short(worst[2])})"), thresholds, derived)
