"""The warnings aspect's rule: listed and passed alone (its details a line a warning); in compare judged by what is
new in the candidate since the baseline (aspects.warnings.judge.judge_in_compare, reached through
analysis.sides.judge_against_baseline)."""

from __future__ import annotations

from test_compare_judgements import judged, result  # compare's two reports, as the generic layer's tests build them

from torch_upgrade_check.analysis.verdicts import decide
from torch_upgrade_check.model import CheckResult, CheckSpec, Observation, Outcome

W = {"category": "FutureWarning", "module": "torch.serialization", "message": "weights_only will default to True",
     "count": 1, "aspects": ["checkpoint"]}


def test_the_warnings_a_workload_raised_are_listed_and_passed_alone_with_a_line_each_in_the_details() -> None:
    spec = CheckSpec("mlp", "warnings", "cpu", "float32")
    got = decide(spec, Observation(spec.id, "ok", metrics={"warnings": [W, {**W, "category": "UserWarning"}]}))
    assert got.outcome is Outcome.PASSED
    assert got.reason == ('2 warnings (FutureWarning, UserWarning); first: FutureWarning from torch.serialization: '
                          '"weights_only will default to True"')
    assert got.details.splitlines()[1] == ('UserWarning from torch.serialization: "weights_only will default to True" '
                                           '×1 (during checkpoint)')
    none = decide(spec, Observation(spec.id, "ok", metrics={"warnings": []}))
    assert (none.outcome, none.reason, none.details) == (Outcome.PASSED, "no warnings", "")


def test_a_check_that_did_not_pass_on_both_sides_is_left_as_it_was() -> None:
    errored = CheckResult("mlp", "warnings", "cpu", "float32", Outcome.ERROR, reason="crashed", metrics={})
    assert judged([result("mlp", "warnings", warnings=[])], [errored])["mlp[float32]/warnings"] is errored


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
