"""compare's rule for a candidate failure the baseline shares (analysis.shared, applied by sides.mark_preexisting),
on results the real verdicts decide from workers' metrics: the model's own at the same size warns, anything larger,
of another kind, or not a sized correctness failure still fails; then the settings, exit code and headline."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from torch_upgrade_check import cli
from torch_upgrade_check.analysis.shared import SHARED_FACTOR, SHARED_KEY, SHARED_SLACK_ELEMENTS, judge_shared
from torch_upgrade_check.analysis.sides import mark_preexisting
from torch_upgrade_check.analysis.verdicts import decide
from torch_upgrade_check.commands.common import exit_code
from torch_upgrade_check.commands.settings import build
from torch_upgrade_check.errors import EXIT_FAILED, EXIT_PASSED, UsageError
from torch_upgrade_check.model import FAIL_ON, CheckResult, CheckSpec, Observation, Outcome, Report, Status
from torch_upgrade_check.report.outputs import action_outputs
from torch_upgrade_check.report.summary import headline

FP32 = {"rtol": 1.3e-6, "atol": 1e-5}


def t(name: str, err: float, mismatched: int, *, scale: float = 0.02, nan: int = 0, **more: Any) -> dict[str, Any]:
    """A tensor's metrics as worker/tensors.compare sends them."""
    return {"name": name, "numel": 147_456, "scale": scale, "max_abs_err": err, "rmse": err / 50,
            "mismatched": mismatched, "nan": nan, **more}


def decided(aspect: str, metrics: dict[str, Any], status: str = Status.OK, dtype: str = "float32") -> CheckResult:
    obs = Observation(f"vit[{dtype}]/{aspect}", status, metrics=metrics, message="worker crashed" if status != Status.OK else "")
    return decide(CheckSpec("vit", aspect, "cpu", dtype), obs)


def numerics(err: float, mismatched: int, **more: Any) -> CheckResult:
    r = decided("numerics", {**FP32, "per_tensor": [t("output", 1e-7, 0), t("grad:blocks.11.mlp.fc1.weight", err,
                                                                               mismatched)], **more})
    assert r.outcome is Outcome.FAILED or not mismatched, r
    return r


def side(role: str, *results: CheckResult) -> Report:
    return Report(tool_version="1", device="cpu", requested_device="cpu", label=f"{role}-torch", command=["x"],
                  started="2026-12-01T00:00:00+00:00", complete=True, results=results, role=role)


def marked(before: CheckResult, after: CheckResult, fail_on_shared: bool = False) -> CheckResult:
    return mark_preexisting(side("baseline", before), side("candidate", after), fail_on_shared).results[0]


def test_the_same_failure_at_the_same_size_is_the_models_own_and_warns() -> None:
    """The real vit_tiny case of issue 46: 1 element of one gradient, max abs err 5.96e-07, on every torch."""
    got = marked(numerics(5.96e-7, 1), numerics(7.1e-7, 3))
    assert got.outcome is Outcome.SUSPICIOUS, got.reason
    assert got.reason.startswith("the model's own, not the upgrade's: also failed on baseline baseline-torch at the "
                                 "same size: worst error"), got.reason
    assert "(set fail-on-shared-failures to fail on it)" in got.reason and "1 of 2 tensors differ" in got.reason
    assert got.metrics[SHARED_KEY]["baseline"] == "baseline-torch"
    assert got.thresholds["fail_on_shared_failures"] is False


def test_the_input_keeps_a_shared_failure_failing() -> None:
    got = marked(numerics(5.96e-7, 1), numerics(5.96e-7, 1), fail_on_shared=True)
    assert got.outcome is Outcome.FAILED
    assert "the model's own, not new; fail-on-shared-failures fails it" in got.reason


@pytest.mark.parametrize(("err", "mismatched", "same"), [
    (SHARED_FACTOR * 1e-6, 10, True),  # the worst error at the factor: still the same size
    (SHARED_FACTOR * 1e-6 * 1.01, 10, False),  # beyond it
    (1e-5, 10, False),  # a kernel change's tenfold
    (1e-6, int(SHARED_FACTOR * 10 + SHARED_SLACK_ELEMENTS), True),  # elements outside tolerance at the bound
    (1e-6, int(SHARED_FACTOR * 10 + SHARED_SLACK_ELEMENTS) + 1, False),
    (1e-7, 0, None),  # the candidate passes: nothing shared to judge
])
def test_the_same_size_is_within_the_stated_factor(err: float, mismatched: int, same: bool | None) -> None:
    before, after = numerics(1e-6, 10), numerics(err, mismatched)
    shared = judge_shared(before, after)
    assert (shared.same if shared else None) is same, shared
    if same is False:
        got = marked(before, after)
        assert got.outcome is Outcome.FAILED and "but larger here" in got.reason and "the upgrade's, so it fails" in got.reason


def test_a_failure_of_another_kind_is_not_excused() -> None:
    nan = decided("numerics", {**FP32, "per_tensor": [t("output", float("inf"), 3, nan=3, rmse=float("inf"))]})
    got = marked(numerics(1e-6, 10), nan)
    assert got.outcome is Outcome.FAILED and "but another way here: NaN" in got.reason, got.reason
    back = marked(nan, numerics(1e-6, 10))  # NaN on the baseline only: its failure has no size to hold this one to
    assert back.outcome is Outcome.FAILED and "with NaN there: no size to compare with, so it fails" in back.reason
    uncompared = numerics(1e-6, 10, uncompared=["grad:head.weight"])
    both = marked(uncompared, uncompared)  # a tensor produced and never compared: never the model's own
    assert both.outcome is Outcome.FAILED, both.reason
    assert "with a tensor not compared on both sides: not new, but not a size the model's rounding explains" in both.reason


def test_a_changed_fp64_golden_is_the_upgrades() -> None:
    changed = {"fp64_vs_baseline": {"mismatched_count": 4, "numel": 10, "rtol": 1e-7, "worst": "output"}}
    got = marked(numerics(1e-6, 10), numerics(1e-6, 10, **changed))
    assert got.outcome is Outcome.FAILED and "the fp64 golden changed since the baseline" in got.reason


def test_errors_latency_and_unsized_aspects_are_never_excused() -> None:
    crash = decided("numerics", {}, status=Status.CRASH)
    assert marked(crash, crash).outcome is Outcome.ERROR and "also error on baseline" in marked(crash, crash).reason
    nondeterministic = decided("determinism", {"bitwise_equal": False, "differing_tensors": 1, "compared_tensors": 4,
                                               "max_abs_diff": 1e-7, "first_differing": ["grad:x"]})
    got = marked(nondeterministic, nondeterministic)
    assert got.outcome is Outcome.FAILED and got.reason.endswith("(also failed on baseline baseline-torch: not new)")
    slow = CheckResult("vit", "latency", "cpu", "float32", Outcome.FAILED, reason="median 14 ms > limit 12 ms")
    assert marked(slow, slow).outcome is Outcome.FAILED


def amp(per_tensor: list[dict[str, Any]], *, mode: str = "alone", low: int = 12) -> CheckResult:
    sub = {"per_tensor": per_tensor, "rtol": 1e-3, "atol": 1e-5, "low_precision_modules": low, "modules": 14}
    return decided("amp", {"mode": mode, "checked": {"float16": sub}})


def test_amp_shared_when_as_close_as_the_baselines_autocast_step_and_not_when_further() -> None:
    """float16 autocast 2.05e3 unit roundoffs off on every torch (the real mobilenet case of issue 46)."""
    err = 2.05e3 * 2.0**-11  # RMS error in units of the scale
    base = amp([t("output", err * 3, 900, scale=1.0, rmse=err)])
    same = amp([t("output", err * 3, 900, scale=1.0, rmse=err * 1.1, ref_rmse=err)], mode="compare")
    assert base.outcome is Outcome.FAILED and same.outcome is Outcome.FAILED
    assert marked(base, same).outcome is Outcome.SUSPICIOUS
    further = amp([t("output", err * 3, 900, scale=1.0, rmse=err * 1.9, ref_rmse=err / 2)], mode="compare")
    got = marked(base, further)
    assert got.outcome is Outcome.FAILED and "float16 autocast step further from the golden than the baseline's" in got.reason
    no_effect = amp([t("output", err * 3, 900, scale=1.0, rmse=err, ref_rmse=err)], mode="compare", low=0)
    assert marked(base, no_effect).outcome is Outcome.FAILED
    scaler = {"overflow_scale": 65536.0, "overflow_skipped": False, "scaled_step_applied": True,  # broken on both
              "loss_scale": 32768.0}
    broken = [decided("amp", {"mode": mode, "checked": {"float16": {
        "per_tensor": [t("output", err * 3, 900, scale=1.0, rmse=err, ref_rmse=err)], "rtol": 1e-3, "atol": 1e-5,
        "low_precision_modules": 12, "modules": 14, **scaler}}}) for mode in ("alone", "compare")]
    got = marked(*broken)
    assert got.outcome is Outcome.FAILED and "GradScaler's overflow handling on both sides: not new" in got.reason


def test_only_shared_failures_pass_the_run_and_the_headline_counts_them_apart() -> None:
    before = side("baseline", numerics(5.96e-7, 1))
    after = mark_preexisting(before, side("candidate", numerics(5.96e-7, 1)))
    assert exit_code([before, after], frozenset(FAIL_ON)) == EXIT_PASSED
    assert headline([before, after]).endswith("(1 failure the baseline shares (the model's own, not the upgrade's))")
    assert action_outputs([before, after], {})["shared-failures"] == "1"
    warned = CheckResult("mlp", "warnings", "cpu", "float32", Outcome.SUSPICIOUS, reason="1 new warning")
    larger = mark_preexisting(before, side("candidate", numerics(5e-5, 1)))
    mixed = Report(**{**after.__dict__, "results": (*after.results, *larger.results, warned)})
    assert exit_code([before, mixed], frozenset(FAIL_ON)) == EXIT_FAILED
    assert headline([before, mixed]).startswith("❌ failed: 1 correctness failure, 1 failure the baseline shares (the "
                                                "model's own, not the upgrade's), 1 suspicious — ")
    forced = mark_preexisting(before, side("candidate", numerics(5.96e-7, 1)), fail_on_shared=True)
    assert exit_code([before, forced], frozenset(FAIL_ON)) == EXIT_FAILED


def settings(tmp_path: Path, config: str | None, *flags: str) -> bool:
    argv = ["compare", "--candidate-python", "python3", "--baseline-python", "python3", "--out", str(tmp_path / "o"),
            *flags]
    if config is not None:
        path = tmp_path / "torch-upgrade-check.yml"
        path.write_text(f"version: 1\n{config}")
        argv += ["--config", str(path)]
    args: argparse.Namespace = cli.build_parser().parse_args(argv)
    return build(args, argv).fail_on_shared_failures


def test_the_flag_overrides_the_config_key_which_overrides_the_default(tmp_path: Path) -> None:
    assert settings(tmp_path, None) is False
    assert settings(tmp_path, None, "--fail-on-shared-failures") is True
    assert settings(tmp_path, "fail-on-shared-failures: true\n") is True
    assert settings(tmp_path, "fail-on-shared-failures: true\n", "--no-fail-on-shared-failures") is False
    with pytest.raises(UsageError, match="fail-on-shared-failures must be true or false, got 'sometimes'"):
        settings(tmp_path, "fail-on-shared-failures: sometimes\n")
