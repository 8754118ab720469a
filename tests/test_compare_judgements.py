"""What compare judges from both sides' results (analysis.sides.judge_against_baseline) and the
training-curve band (analysis.verdicts): the cases two identical torches must pass, and the changes that fail."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch_upgrade_check.analysis.sides import judge_against_baseline
from torch_upgrade_check.analysis.verdicts import CURVE_RTOL, decide
from torch_upgrade_check.model import CheckResult, CheckSpec, Observation, Outcome, Report

W = {"category": "FutureWarning", "module": "torch.serialization", "message": "weights_only will default to True",
     "count": 1, "aspects": ["checkpoint"]}


def result(workload: str, aspect: str, **metrics: Any) -> CheckResult:
    return CheckResult(workload, aspect, "cpu", "float32", Outcome.PASSED, reason="ok", metrics=metrics)


def report(role: str, *results: CheckResult) -> Report:
    return Report(tool_version="1", device="cpu", requested_device="cpu", label=f"{role}-torch", command=["x"],
                  started="2026-12-01T00:00:00+00:00", complete=True, results=results, role=role)


def judged(before: list[CheckResult], after: list[CheckResult], fail_on: frozenset[str] = frozenset()) -> dict:
    out = judge_against_baseline(report("baseline", *before), report("candidate", *after), fail_on)
    return {r.id: r for r in out.results}


def test_a_warning_raised_once_per_process_under_another_workload_is_not_new() -> None:
    got = judged([result("mlp", "warnings", warnings=[W]), result("cnn", "warnings", warnings=[])],
                 [result("mlp", "warnings", warnings=[]), result("cnn", "warnings", warnings=[W])], frozenset({"warnings"}))
    assert {k: r.outcome for k, r in got.items()} == dict.fromkeys(got, Outcome.PASSED)
    assert got["cnn[float32]/warnings"].metrics["new_warnings"] == []
    assert got["mlp[float32]/warnings"].metrics["gone_warnings"] == []


def test_a_new_warning_is_suspicious_and_fails_only_under_fail_on_warnings() -> None:
    new = {**W, "message": "TF32 flags are deprecated"}
    before, after = [result("mlp", "warnings", warnings=[W])], [result("mlp", "warnings", warnings=[W, new])]
    assert judged(before, after)["mlp[float32]/warnings"].outcome is Outcome.SUSPICIOUS
    failed = judged(before, after, frozenset({"warnings"}))["mlp[float32]/warnings"]
    assert failed.outcome is Outcome.FAILED and "TF32 flags are deprecated" in failed.reason


def test_graph_breaks_fail_when_they_grow_or_the_single_graph_is_lost_not_when_reworded() -> None:
    base = result("mlp", "compile", graph_breaks=1, graphs_compiled=2, graph_break_reasons=["a"], fullgraph=False)
    reworded = result("mlp", "compile", graph_breaks=1, graphs_compiled=2, graph_break_reasons=["b"], fullgraph=False)
    assert judged([base], [reworded])["mlp[float32]/compile"].outcome is Outcome.PASSED
    whole = result("mlp", "compile", graph_breaks=0, graphs_compiled=1, graph_break_reasons=[], fullgraph=True)
    skipped = result("mlp", "compile", graph_breaks=0, graphs_compiled=1, graph_break_reasons=[], fullgraph=False,
                     dynamo_fallbacks=["skipped frame"])
    lost = judged([whole], [skipped])["mlp[float32]/compile"]
    assert lost.outcome is Outcome.FAILED and "no longer one graph" in lost.reason and "skipped frame" in lost.reason
    more = result("mlp", "compile", graph_breaks=2, graphs_compiled=3, graph_break_reasons=["a", "c"], fullgraph=False)
    assert judged([base], [more])["mlp[float32]/compile"].outcome is Outcome.FAILED


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


def test_a_training_step_that_no_longer_compiles_fails_compare() -> None:
    base = result("mlp", "compile", graph_breaks=0, graphs_compiled=2, fullgraph=True, training_step=True)
    lost = result("mlp", "compile", graph_breaks=0, graphs_compiled=1, fullgraph=True, training_step=False,
                  training_step_error="Unsupported: using `torch.autograd.grad`")
    out = judged([base], [lost])["mlp[float32]/compile"]
    assert out.outcome is Outcome.FAILED and "the compiled training step raises Unsupported" in out.reason
    assert judged([lost], [lost])["mlp[float32]/compile"].outcome is Outcome.PASSED  # not new: the baseline's too


def test_an_autocast_step_with_nothing_compared_never_passes() -> None:
    empty = amp(bf16={"per_tensor": []})
    assert empty.outcome is Outcome.FAILED and "nothing was compared with the golden" in empty.reason


def test_the_first_node_where_the_post_grad_graphs_part_is_named() -> None:
    from torch_upgrade_check.analysis.sides import first_graph_difference

    one = [["placeholder float32[4, 8]", "call_function aten.mm.default float32[4, 16]", "output"]]
    assert first_graph_difference(one, one) is None
    assert first_graph_difference(None, one) is None  # a side that kept no graphs: nothing to name
    fused = [["placeholder float32[4, 8]", "call_function aten.addmm.default float32[4, 16]", "output"]]
    assert first_graph_difference(one, fused) == {"where": "graph 1, node 2",
                                                  "baseline": "call_function aten.mm.default float32[4, 16]",
                                                  "candidate": "call_function aten.addmm.default float32[4, 16]"}
    assert first_graph_difference(one, [one[0][:2]])["candidate"] == "(the graph ends)"
    assert first_graph_difference(one, one + one) == {"where": "graph 2", "baseline": "1 graphs", "candidate": "2 graphs"}


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

    from torch_upgrade_check.analysis.verdicts import AMP_ROUNDOFFS, UNIT_ROUNDOFF

    worker = Path(__file__).resolve().parents[1] / "src" / "torch_upgrade_check" / "worker"

    def constant(module: str, name: str) -> Any:
        tree = ast.parse((worker / module).read_text())
        found = [n.value for n in tree.body if isinstance(n, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in n.targets)]
        return eval(compile(ast.Expression(found[0]), module, "eval"))  # literals and 2.0**-k only

    assert constant("amp.py", "ROUNDOFFS") == AMP_ROUNDOFFS
    assert all(constant("rounding.py", "UNIT")[name] == unit for name, unit in UNIT_ROUNDOFF.items())
