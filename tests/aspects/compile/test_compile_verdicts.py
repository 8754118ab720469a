"""The compile checks' rule on hand-made metrics (aspects/compile/judge.py, and compare's per-size recompiles): each way a
compiled model can fail as the team compiles it, and what two identical torches must pass. No torch."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from test_compare_judgements import judged, result

from torch_upgrade_check.analysis.verdicts import decide
from torch_upgrade_check.model import CheckSpec, Observation, Outcome


def tensor(name: str, rmse: float, ref_rmse: float, mismatched: int = 4) -> dict[str, Any]:
    return {"name": name, "numel": 64, "scale": 1.0, "mismatched": mismatched, "max_abs_err": rmse * 3, "rmse": rmse,
            "ref_rmse": ref_rmse}


def metrics(**extra: Any) -> dict[str, Any]:
    """A compiled mlp whose output and one gradient are as close to the golden as eager's (and each size's output)."""
    per_tensor = [tensor("output", 1e-7, 1e-7), tensor("grad:0.weight", 2e-7, 1.5e-7),
                  tensor("size [8, 64]:output", 1e-7, 1e-7)]
    return {"per_tensor": per_tensor, "tensors": len(per_tensor), "rtol": 1.3e-6, "atol": 1e-5, "max_abs_err": 6e-7,
            "graphs_compiled": 2, "fullgraph": True, "training_step": True, "compile_options": {},
            "dynamic_marked": ["input0 dim 0"], "dynamic_sizes": [{"size": "[8, 64]", "graphs": 0}], **extra}


def decided(aspect: str = "compile", params: dict[str, Any] | None = None, **extra: Any) -> Any:
    spec = CheckSpec("mlp", aspect, "cpu", "float32", params=params or {})
    return decide(spec, Observation(spec.id, "ok", metrics(**extra)))


def test_a_compile_that_passes_says_how_it_compiled_and_what_the_sizes_did() -> None:
    r = decided()
    assert r.outcome is Outcome.PASSED and r.reason.startswith("all 3 tensors are within tolerance")
    assert "1 other size (input0 dim 0 marked dynamic): no recompile" in r.reason
    mode = decided("compile-mode", compile_options={"mode": "max-autotune-no-cudagraphs"},
                   compile_env={"TORCHINDUCTOR_FREEZING": "1"})
    assert mode.outcome is Outcome.PASSED
    assert mode.reason.startswith("torch.compile(model, mode='max-autotune-no-cudagraphs'): all 3 tensors")
    assert mode.reason.endswith("; compiled with TORCHINDUCTOR_FREEZING=1 set")
    # a recompile at a size is shown, and fails only against a baseline that did not recompile there (below)
    again = decided(dynamic_sizes=[{"size": "[8, 64]", "graphs": 1}])
    assert again.outcome is Outcome.PASSED and "recompiled at [8, 64] (1 graph)" in again.reason


@pytest.mark.parametrize(("extra", "says"), [
    ({"compile_error": "BackendCompilerFailed: backend='inductor' raised: AssertionError: no template",
      "compile_options": {"mode": "max-autotune-no-cudagraphs"}},
     "torch.compile(model, mode='max-autotune-no-cudagraphs') raises BackendCompilerFailed: backend='inductor' raised: "
     "AssertionError: no template: the model does not compile"),
    ({"dynamic_sizes": [{"size": "[8, 64]", "graphs": 0}, {"size": "[48, 64]", "graphs": 1,
                                                           "error": "ConstraintViolationError: specialized to 48"}]},
     "the compiled model raises at size [48, 64]: ConstraintViolationError: specialized to 48"),
    ({"fullgraph": False, "fullgraph_error": "Unsupported: graph break", "compile_options": {"fullgraph": True}},
     "fullgraph=True, which the workload's compile config asks for, fails: Unsupported: graph break"),
    ({"graphs_compiled": 0, "dynamo_fallbacks": ["recompile limit"]}, "torch.compile compiled no graph"),
    ({"per_tensor": [tensor("output", 1e-7, 1e-7), tensor("size [48, 64]:output", 1e-3, 1e-7)]},
     "worst size [48, 64]:output"),
])
def test_each_way_a_compiled_model_fails_is_named(extra: dict[str, Any], says: str) -> None:
    r = decided(**extra)
    assert r.outcome is Outcome.FAILED and says in r.reason, r.reason


def test_fullgraph_failing_is_a_note_unless_the_workload_asks_for_one_graph() -> None:
    r = decided(fullgraph=False, fullgraph_error="Unsupported: graph break", graph_breaks=1,
                graph_break_reasons=["gelu"])
    assert r.outcome is Outcome.PASSED and "; fullgraph=True fails: Unsupported: graph break" in r.reason


def test_in_compare_the_compiled_outputs_are_judged_against_the_baselines_by_the_cross_version_rule() -> None:
    """A change that moves eager and compiled alike passes against eager and fails against the baseline's compiled
    outputs; without the baseline's file, it is said."""
    same = {"per_tensor": [tensor("output", 1e-7, 1e-7)], "tensors": 1, "rtol": 1.3e-6, "atol": 1e-5,
            "baseline_torch": "2.13.0"}
    ok = decided(vs_baseline=same)
    assert ok.outcome is Outcome.PASSED
    assert "against baseline 2.13.0's compiled outputs and fp64 golden: the one tensor is within tolerance" in ok.reason
    moved = {**same, "per_tensor": [tensor("output", 1e-3, 1e-7)], "one_side_only": ["grad:x"]}
    off = decided(vs_baseline=moved)
    assert off.outcome is Outcome.FAILED
    assert off.reason.startswith("the compiled outputs differ from baseline 2.13.0's compiled outputs (judged against "
                                 "its fp64 golden, the cross-version rule): 1 of 1 tensors differ; worst output")
    assert "(grad:x on one side only)" in off.reason
    missing = decided(vs_baseline_missing="the baseline saved no compiled outputs")
    assert missing.outcome is Outcome.PASSED and "not compared with the baseline's compiled outputs" in missing.reason


@pytest.mark.parametrize("aspect", ["compile", "compile-mode"])
def test_a_recompile_at_a_dynamic_size_new_in_the_candidate_fails_compare(aspect: str) -> None:
    sizes = [{"size": "[8, 16]", "graphs": 0}, {"size": "[48, 16]", "graphs": 0}]
    again = [{"size": "[8, 16]", "graphs": 0}, {"size": "[48, 16]", "graphs": 1}]
    base = result("dyn", aspect, graphs_compiled=2, fullgraph=True, dynamic_sizes=sizes)
    cand = result("dyn", aspect, graphs_compiled=2, fullgraph=True, dynamic_sizes=again)
    check = f"dyn[float32]/{aspect}"
    out = judged([base], [cand])[check]
    assert out.outcome is Outcome.FAILED, out.reason
    assert out.reason.startswith("new in the candidate: recompiled at size [48, 16] (1 graph, baseline baseline-torch: 0)")
    assert "each recompile is a compile in the middle of serving or training" in out.reason
    assert judged([cand], [cand])[check].outcome is Outcome.PASSED  # the baseline recompiled there too
    assert judged([base], [base])[check].outcome is Outcome.PASSED
    lenient = replace(cand, thresholds={"allow_graph_breaks": True})
    allowed = judged([base], [lenient])[check]
    assert allowed.outcome is Outcome.PASSED and "allowed by the workload's allow-graph-breaks" in allowed.reason
