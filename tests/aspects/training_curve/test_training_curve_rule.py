"""The training-curve band (aspects.training_curve.judge, through verdicts.decide): it follows the loss's scale
through zero, passes rounding and fails a drift."""

from __future__ import annotations

from torch_upgrade_check.analysis.verdicts import decide
from torch_upgrade_check.aspects.training_curve.judge import CURVE_RTOL
from torch_upgrade_check.model import CheckResult, CheckSpec, Observation, Outcome


def curve(losses: list[float], baseline: list[float]) -> CheckResult:
    spec = CheckSpec("mlp", "training-curve", "cpu", "float32")
    metrics = {"mode": "compare", "losses": losses, "second_run": losses, "baseline_losses": baseline,
               "baseline_second_run": baseline}
    return decide(spec, Observation(spec.id, "ok", metrics=metrics))


def test_the_training_curve_band_follows_the_losss_scale_through_zero() -> None:
    baseline = [10.0, 5.0, 0.0, -5.0, -10.0]  # a loss that crosses zero: its band must not vanish there
    rounding = [b + 1e-6 for b in baseline]
    assert curve(rounding, baseline).outcome is Outcome.PASSED
    drifted = [*baseline[:3], -5.0 * (1 + 3 * CURVE_RTOL), -10.0]
    out = curve(drifted, baseline)
    assert out.outcome is Outcome.FAILED and "at step 4 of 5" in out.reason
    assert curve(baseline, baseline).reason.endswith("is bitwise the baseline's")
