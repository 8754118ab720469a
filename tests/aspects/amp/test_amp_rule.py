"""The amp rule (aspects.amp.judge, through verdicts.decide): an autocast step judged in unit roundoffs of its dtype
or the model's own error, the GradScaler's overflow handling, and in compare the baseline's step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch_upgrade_check.analysis.verdicts import decide
from torch_upgrade_check.model import CheckResult, CheckSpec, Observation, Outcome


def amp(mode: str = "alone", **changes: Any) -> CheckResult:
    """An amp check whose bfloat16 step has one tensor at `error` × its scale (and, in compare, the baseline's at
    `ref`), with a float16 step whose scaler behaved."""
    tensor = {"name": "grad:0.weight", "numel": 8, "scale": 1.0, "mismatched": 8, "nan": 0,
              "rmse": changes.pop("error", 0.02), **({"ref_rmse": changes.pop("ref", 0.02)} if mode == "compare" else {})}
    bf16 = {"per_tensor": [tensor], "rtol": 1.6e-2, "atol": 1e-5, "modules": 6, "low_precision_modules": 6,
            **changes.pop("bf16", {})}
    fp16 = {"per_tensor": [{**tensor, "rmse": 0.002, **({"ref_rmse": 0.002} if mode == "compare" else {})}],
            "rtol": 1e-3, "atol": 1e-5, "modules": 6, "low_precision_modules": 6, "overflow_scale": 2.0**40,
            "overflow_skipped": True, "overflow_backed_off": True, "weights_finite_after_overflow": True,
            "scaled_attempts": 1, "loss_scale": 65536.0, "scaled_step_applied": True, **changes.pop("fp16", {})}
    spec = CheckSpec("mlp", "amp", "cpu", "float32")
    metrics = {"mode": mode, "checked": {"bfloat16": bf16, "float16": fp16}, "not_offered": {},
               "optimizer": "SGD(lr=0.01)", "baseline_torch": "2.13.0", **changes}
    return decide(spec, Observation(spec.id, "ok", metrics=metrics))


def test_an_autocast_step_is_judged_in_unit_roundoffs_of_its_dtype() -> None:
    ok = amp()
    assert ok.outcome is Outcome.PASSED and "largest error 5.1 unit roundoffs (grad:0.weight)" in ok.reason
    assert "an overflow at scale 2^40 skipped, a step applied at 65536" in ok.reason
    far = amp(error=0.3)  # 77 roundoffs of bfloat16
    assert far.outcome is Outcome.FAILED and "76.8 unit roundoffs of bfloat16 (at most 64)" in far.reason


def test_an_autocast_step_beyond_64_roundoffs_passes_within_the_models_own_error_and_fails_beyond_it() -> None:
    """mobilenet_v3_small's float16 output: far beyond 64 unit roundoffs of its scale, as the golden recomputed with
    autocast's rounding simulated is too (the model amplifies rounding): judged against that, not a fixed count."""
    own = amp(fp16={"per_tensor": [{"name": "output", "numel": 20, "scale": 1.0, "mismatched": 20, "nan": 0,
                                    "rmse": 1.0, "model_rmse": 0.3}]})
    assert own.outcome is Outcome.PASSED, own.reason
    assert "largest error 2048.0 unit roundoffs (output), 3.3× the model's own float16 rounding error" in own.reason
    beyond = amp(fp16={"per_tensor": [{"name": "output", "numel": 20, "scale": 1.0, "mismatched": 20, "nan": 0,
                                       "rmse": 1.0, "model_rmse": 0.2}]})
    assert beyond.outcome is Outcome.FAILED
    assert ("output: error 1 of its scale, 2.05e+03 unit roundoffs of float16 (at most 64) and 5× the model's own "
            "float16 rounding error (at most 4×)") in beyond.reason


def test_autocast_without_effect_or_a_scaler_that_applies_an_overflow_fails() -> None:
    off = amp(bf16={"low_precision_modules": 0})
    assert off.outcome is Outcome.FAILED and off.reason.startswith("bfloat16 autocast: had no effect")
    blind = amp(fp16={"overflow_skipped": False, "weights_finite_after_overflow": False})
    assert blind.outcome is Outcome.FAILED
    assert "float16 autocast with GradScaler: the GradScaler applied a step whose float16 gradients overflowed" in blind.reason
    stuck = amp(fp16={"overflow_backed_off": False})
    assert stuck.outcome is Outcome.FAILED and "did not lower its scale" in stuck.reason
    never = amp(fp16={"scaled_step_applied": False, "scaled_attempts": 8, "loss_scale": 256.0})
    assert never.outcome is Outcome.FAILED and "no step was applied in 8 tries" in never.reason


def test_in_compare_an_autocast_step_twice_as_far_from_the_golden_as_the_baselines_fails() -> None:
    assert amp("compare", error=0.02, ref=0.02).outcome is Outcome.PASSED
    worse = amp("compare", error=0.05, ref=0.02)  # within 64 roundoffs, but 2.5x the baseline's error
    assert worse.outcome is Outcome.FAILED
    assert "further from the fp64 golden than baseline 2.13.0's autocast step" in worse.reason


def test_an_autocast_step_with_nothing_compared_never_passes() -> None:
    empty = amp(bf16={"per_tensor": []})
    assert empty.outcome is Outcome.FAILED and "nothing was compared with the golden" in empty.reason


def test_a_model_whose_float16_gradients_never_overflow_is_said_not_failed() -> None:
    """A small BERT's float16 gradients stay finite at 2^40 on the CPU: a step applied there overflowed nothing, so
    it is no wrong step; at every larger scale tried too, the overflow handling is said to be unexercised."""
    quiet = amp(fp16={"overflow_scale": 2.0**120, "overflow_exercised": False, "overflow_skipped": None})
    assert quiet.outcome is Outcome.PASSED, quiet.reason
    assert ("the GradScaler's overflow handling not exercised: the model's float16 gradients stayed finite up to "
            "scale 2^120; a step applied at 65536") in quiet.reason
    wrong = amp(fp16={"overflow_scale": 2.0**64, "overflow_exercised": True, "overflow_skipped": False})
    assert wrong.outcome is Outcome.FAILED and "overflowed (loss scale 1.84467e+19)" in wrong.reason


def test_the_worker_computes_amps_yardstick_wherever_the_verdict_reads_it() -> None:
    """The worker skips the fp64 yardstick step while every tensor is within AMP_ROUNDOFFS: the same number (read from
    the worker's source: this test stays torch-free)."""
    import ast

    from torch_upgrade_check.aspects.amp.judge import AMP_ROUNDOFFS, UNIT_ROUNDOFF

    src = Path(__file__).resolve().parents[3] / "src" / "torch_upgrade_check"

    def constant(module: str, name: str) -> Any:
        tree = ast.parse((src / module).read_text())
        found = [n.value for n in tree.body if isinstance(n, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in n.targets)]
        return eval(compile(ast.Expression(found[0]), module, "eval"))  # literals and 2.0**-k only

    assert constant("aspects/amp/run.py", "ROUNDOFFS") == AMP_ROUNDOFFS
    assert all(constant("worker/rounding.py", "UNIT")[name] == unit for name, unit in UNIT_ROUNDOFF.items())
