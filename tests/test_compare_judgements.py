"""What compare judges from both sides' results (orchestrate.compare.judge_against_baseline) and the
training-curve band (analysis.verdicts): the cases two identical torches must pass, and the changes that fail."""

from __future__ import annotations

from typing import Any

from torch_upgrade_check.analysis.verdicts import CURVE_RTOL, decide
from torch_upgrade_check.model import CheckResult, CheckSpec, Observation, Outcome, Report
from torch_upgrade_check.orchestrate.compare import judge_against_baseline

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
