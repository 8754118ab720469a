"""compile's compare rule (aspects/compile/judge.py judge_in_compare, through analysis.sides.judge_against_baseline):
graph breaks, graphs, a lost single graph or training step new in the candidate fail; the same ones reworded do not."""

from __future__ import annotations

from test_compare_judgements import judged, result

from torch_upgrade_check.aspects.compile.judge import first_graph_difference
from torch_upgrade_check.model import Outcome


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


def test_a_training_step_that_no_longer_compiles_fails_compare() -> None:
    base = result("mlp", "compile", graph_breaks=0, graphs_compiled=2, fullgraph=True, training_step=True)
    lost = result("mlp", "compile", graph_breaks=0, graphs_compiled=1, fullgraph=True, training_step=False,
                  training_step_error="Unsupported: using `torch.autograd.grad`")
    out = judged([base], [lost])["mlp[float32]/compile"]
    assert out.outcome is Outcome.FAILED and "the compiled training step raises Unsupported" in out.reason
    assert judged([lost], [lost])["mlp[float32]/compile"].outcome is Outcome.PASSED  # not new: the baseline's too


def test_the_first_node_where_the_post_grad_graphs_part_is_named() -> None:
    one = [["placeholder float32[4, 8]", "call_function aten.mm.default float32[4, 16]", "output"]]
    assert first_graph_difference(one, one) is None
    assert first_graph_difference(None, one) is None  # a side that kept no graphs: nothing to name
    fused = [["placeholder float32[4, 8]", "call_function aten.addmm.default float32[4, 16]", "output"]]
    assert first_graph_difference(one, fused) == {"where": "graph 1, node 2",
                                                  "baseline": "call_function aten.mm.default float32[4, 16]",
                                                  "candidate": "call_function aten.addmm.default float32[4, 16]"}
    assert first_graph_difference(one, [one[0][:2]])["candidate"] == "(the graph ends)"
    assert first_graph_difference(one, one + one) == {"where": "graph 2", "baseline": "1 graphs", "candidate": "2 graphs"}
