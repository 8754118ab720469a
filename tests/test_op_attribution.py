"""Where a latency change lives, op by op (issue 35 items 1 and 2): the pure parts, on hand-made profiles and timings.

The end-to-end tests (a torch whose gelu kernel is slower, and its A/A) are in tests/test_compare_e2e.py."""

from __future__ import annotations

import json
import math

import pytest

from torch_upgrade_check.analysis import attribution, optiming, stats
from torch_upgrade_check.model import CheckResult, CheckSpec, Observation, Outcome
from torch_upgrade_check.orchestrate import attribute, compare, session
from torch_upgrade_check.orchestrate import optiming as op_timing
from torch_upgrade_check.report import attribution as rendered
from torch_upgrade_check.report.junit import _body
from torch_upgrade_check.suite import BUILTIN

GELU, ADDMM = ("aten::gelu", [[32, 128]]), ("aten::addmm", [[128], [32, 64], [64, 128]])


def profile(wall: float, gelu: float, addmm: float, *, jitter: float = 0.0, extra: dict | None = None) -> dict:
    ops = [{"op": name, "shapes": shapes, "dtypes": ["float32"] * len(shapes), "ms": ms * (1 + jitter), "count": 1.0}
           for (name, shapes), ms in ((GELU, gelu), (ADDMM, addmm))]
    ops += [{"op": k, "shapes": [], "dtypes": [], "ms": v, "count": 1.0} for k, v in (extra or {}).items()]
    return {"calls": 50, "wall_ms": wall * (1 + jitter), "time": "cpu", "ops": ops, "other_ms": 0.0}


JITTERS = (0.0, 0.01, -0.01, 0.02)


def test_mann_whitney_and_the_shift_interval_are_exact_at_small_samples() -> None:
    assert stats._rank_sum_counts(3, 3) == (1, 1, 2, 3, 3, 3, 3, 2, 1, 1) and sum(stats._rank_sum_counts(4, 4)) == 70
    assert stats.mann_whitney_p([1, 2, 3], [4, 5, 6]) == pytest.approx(1 / 20)  # the smallest p at 3 and 3
    assert stats.mann_whitney_p([1, 2, 3, 4], [5, 6, 7, 8]) == pytest.approx(1 / 70)
    assert stats.mann_whitney_p([4, 5, 6], [1, 2, 3]) == 1.0
    assert stats.mann_whitney_p([1, 2, 3], [1, 2, 3]) > 0.5  # ties count half, rounded towards no evidence
    # 3 and 3 at 5% a side: the whole range of the 9 differences; 4 and 4: the second from each end of 16
    assert stats.shift_interval([1, 2, 3], [4, 5, 6], 0.05) == (1, 5)
    assert stats.shift_interval([1, 2, 3, 4], [5, 6, 7, 8], 0.05) == (2, 6)
    assert stats.shift_interval([1, 2], [3, 4], 0.05) == (-math.inf, math.inf)  # too few to reach the level


def test_a_slower_op_tops_the_table_with_its_share_and_how_sure_it_is() -> None:
    table = attribution.attribute([profile(0.10, 0.02, 0.05, jitter=j) for j in JITTERS],
                                  [profile(0.16, 0.08, 0.05, jitter=j) for j in JITTERS])
    top = table["ops"][0]
    assert (top["op"], top["shapes"], top["dtypes"]) == ("aten::gelu", [[32, 128]], ["float32"])
    assert top["ratio"] == pytest.approx(4.0, rel=0.02) and top["share"] == pytest.approx(1.0, abs=0.05)
    assert top["low_ms"] < top["change_ms"] < top["high_ms"] and top["low_ms"] > 0
    assert top["share_low"] <= top["share"] <= top["share_high"]
    assert top["p"] == pytest.approx(1 / 70, abs=1e-6) and top["sure"] is True
    assert len(top["baseline_rounds_ms"]) == len(top["candidate_rounds_ms"]) == 4
    # addmm did not change: under 1% of the change, so not listed; the pseudo-row of time outside the ops neither
    assert [r["op"] for r in table["ops"]] == ["aten::gelu"] and table["not_listed"] == 2
    assert table["total"]["change_ms"] == pytest.approx(0.06, rel=0.05) and table["rounds"] == [4, 4]
    line = attribution.lead(table)
    assert line.startswith("most of it in aten::gelu [32, 128] float32: 20.1 µs → 80.4 µs a forward (4.00×), 100% of "
                           "the slowdown (90% interval ") and line.endswith("p 0.014, sure)"), line
    json.dumps(table, allow_nan=False)  # report.json-ready


def test_shares_are_of_the_ab_slowdown_where_there_is_one_else_of_the_profiled_forwards_change() -> None:
    """The profiled wall carries what no op does (preemption between ops): the A/B's own figure is the whole."""
    base, cand = ([profile(0.10, 0.02, 0.05, jitter=j) for j in JITTERS],
                  [profile(0.16, 0.08, 0.05, jitter=j) for j in JITTERS])
    table = attribution.attribute(base, cand, slowdown_ms=0.12)
    top = table["ops"][0]
    assert (table["share_of"], table["slowdown_ms"]) == ("ab", 0.12) and top["share"] == pytest.approx(0.5, abs=0.03)
    assert top["share_low"] == pytest.approx(top["low_ms"] / 0.12, abs=1e-4)
    # no A/B figure: the profiled forward's own change; an A/B that measured no slowdown: no shares at all
    assert attribution.attribute(base, cand, slowdown_ms=None)["share_of"] == "profile"
    for none in (0.0, -0.01):
        assert attribution.attribute(base, cand, slowdown_ms=none)["share_of"] == "none"
    r = CheckResult("mlp", "latency", "cpu", "float32", Outcome.FAILED, metrics={"op_attribution": table})
    assert "Shares are of the slowdown the A/B measured (120 µs a forward)" in rendered.text_block(r)


# issue 46 item 9's case: the A/B read the candidate faster (undecided), the profiled forwards slower, all of it
# outside the aten ops (1.15 ms -> 2.64 ms); words of a slowdown there contradict the verdict
OUTSIDE_SLOWER = ([profile(1.22, 0.02, 0.05, jitter=j) for j in JITTERS],
                  [profile(2.71, 0.02, 0.05, jitter=j) for j in JITTERS])


@pytest.mark.parametrize("ab_ms, change", [((1.40, 1.31), "undecided"), ((1.40, 1.31), None),
                                           ((1.40, 1.40), "undecided"), ((1.40, 1.43), "unchanged"),
                                           ((1.40, 1.20), "improved")])
def test_an_ab_not_slower_names_the_largest_change_and_no_slowdown(ab_ms, change) -> None:
    table = attribution.attribute(*OUTSIDE_SLOWER, ab_ms=ab_ms, change=change)
    assert table["ab_not_slower"] is True and table["share_of"] == "none"
    assert all(r["share"] is None and r["share_low"] is None for r in table["ops"])
    line = attribution.lead(table)
    assert line.startswith("the largest change: (outside aten ops): 1.16 ms → 2.65 ms a forward (2.30×) (90% "
                           "interval "), line
    assert line.endswith(f"; the candidate is not slower overall (the A/B: {attribution.ms(ab_ms[0])} → "
                         f"{attribution.ms(ab_ms[1])} a forward)"), line
    assert "slowdown" not in line and "most of it" not in line
    r = CheckResult("mlp", "latency", "cpu", "float32", Outcome.PASSED, reason="undecided",
                    metrics={"change": change or "undecided", "op_attribution": table})
    for text in (rendered.text_block(r), rendered.markdown_block(r, "cpu candidate").replace("\\", "")):
        assert "slowdown" not in text, text
        assert "the candidate is not slower overall" in text and "No shares: the A/B did not find" in text


def test_an_ab_figure_that_is_not_a_slowdown_shares_nothing_out() -> None:
    """The A/B's slowdown alone (compare's call before `ab_ms`): faster by 0.09 ms a forward."""
    line = attribution.lead(attribution.attribute(*OUTSIDE_SLOWER, slowdown_ms=-0.09))
    assert line.startswith("the largest change: (outside aten ops)") and "slowdown" not in line, line


def test_a_faster_op_counts_as_a_change_where_the_ab_is_not_slower() -> None:
    """Candidate faster overall: gelu 4x faster is the largest change, named as one (the sort is by size either way)."""
    table = attribution.attribute([profile(0.16, 0.08, 0.05, jitter=j) for j in JITTERS],
                                  [profile(0.10, 0.02, 0.05, jitter=j) for j in JITTERS], ab_ms=(0.16, 0.10))
    assert table["ops"][0]["op"] == "aten::gelu" and table["ops"][0]["change_ms"] < 0
    assert attribution.lead(table).startswith("the largest change: aten::gelu [32, 128] float32: 80.4 µs → 20.1 µs")


def test_an_undecided_ab_that_reads_slower_still_shares_out_its_slowdown() -> None:
    table = attribution.attribute(*OUTSIDE_SLOWER, ab_ms=(1.40, 2.80), change="undecided")
    assert table["ab_not_slower"] is False and table["share_of"] == "ab"
    assert attribution.lead(table).startswith("most of it in (outside aten ops): 1.16 ms → 2.65 ms a forward (2.30×), "
                                              "107% of the slowdown")


def test_a_slowdown_above_the_kernels_is_named_as_time_outside_the_ops() -> None:
    """inject.py's kind of slowdown (a Python busy wait around the module call): no op changed."""
    table = attribution.attribute([profile(0.10, 0.02, 0.05, jitter=j) for j in JITTERS],
                                  [profile(0.20, 0.02, 0.05, jitter=j) for j in JITTERS])
    assert table["ops"][0]["op"] == attribution.OUTSIDE and table["ops"][0]["share"] == pytest.approx(1.0, abs=0.05)


def test_an_op_only_one_side_runs_is_new_and_ops_are_keyed_by_their_shapes() -> None:
    table = attribution.attribute([profile(0.10, 0.02, 0.05, jitter=j) for j in JITTERS],
                                  [profile(0.13, 0.02, 0.05, jitter=j, extra={"aten::_new_kernel": 0.03})
                                   for j in JITTERS])
    top = table["ops"][0]
    assert top["op"] == "aten::_new_kernel" and top["ratio"] is None and top["baseline_ms"] == 0
    assert "(new)" in attribution.op_line(top, table["total"])


def test_too_few_rounds_give_figures_without_intervals_and_say_so() -> None:
    table = attribution.attribute([profile(0.10, 0.02, 0.05), profile(0.1, 0.02, 0.05, jitter=0.01)],
                                  [profile(0.16, 0.08, 0.05), profile(0.16, 0.08, 0.05, jitter=0.01)])
    top = table["ops"][0]
    assert top["low_ms"] is None and top["share_low"] is None and top["sure"] is False
    assert "no interval: fewer than 3 rounds a side" in attribution.op_line(top, table["total"])


def test_a_profile_that_does_not_reproduce_the_slowdown_names_no_op() -> None:
    table = attribution.attribute([profile(0.10, 0.02, 0.05, jitter=j) for j in JITTERS],
                                  [profile(0.10, 0.02, 0.05, jitter=-j) for j in JITTERS])
    assert all(r["share"] is None for r in table["ops"]) and len(table["ops"]) == attribution.UNSLOWED_TOP
    assert attribution.lead(table).startswith("the profiled forwards did not reproduce the slowdown")
    assert attribution.lead(attribution.attribute([], [])) == "no op profile to attribute the change to"


def test_the_table_renders_first_for_the_summary_and_in_the_junit_body() -> None:
    table = attribution.attribute([profile(0.10, 0.02, 0.05, jitter=j) for j in JITTERS],
                                  [profile(0.16, 0.08, 0.05, jitter=j) for j in JITTERS])
    table["error"] = "the candidate's profile in round 5 failed: timeout: timed out"
    r = CheckResult("mlp", "latency", "cpu", "float32", Outcome.FAILED, reason="regression: latency 1.6× slower",
                    metrics={"change": "regression", "op_attribution": table})
    block = rendered.markdown_block(r, "cpu candidate")
    assert block.startswith("**Where the time went: mlp\\[float32\\]\\/latency on cpu candidate**")
    assert "| aten\\:\\:gelu | \\[32\\, 128\\] float32 | 20\\.1 µs | 80\\.4 µs | 4.00× |" in block
    assert "round 5 failed" in block and "2 more ops not listed, each under 1% of the change" in block
    body = _body(r)
    assert body.index("regression: latency") < body.index("where the time went") < body.index("- aten::gelu [32, 128]")
    plain = CheckResult("mlp", "latency", "cpu", "float32", Outcome.PASSED)
    assert rendered.markdown_block(plain, "cpu") == "" and rendered.text_block(plain) == ""


def test_only_regressed_or_undecided_profiled_aspects_are_attributed_and_calls_are_bounded() -> None:
    def result(aspect: str, change: str) -> CheckResult:
        return CheckResult("mlp", aspect, "cpu", "float32", Outcome.FAILED, metrics={"change": change})

    assert attribute.wanted(result("latency", "regression")) and attribute.wanted(result("latency", "undecided"))
    assert not attribute.wanted(result("latency", "unchanged")) and not attribute.wanted(result("memory", "regression"))
    assert attribute.calls_for(0.06) == attribute.MAX_CALLS and attribute.calls_for(500.0) == 1
    assert attribute.calls_for(1.0) == 50 and attribute.calls_for(math.nan) == 1


def rounds(base: float, cand: float, n: int = 8, wobble: float = 0.02) -> list[tuple[float, float]]:
    return [(base * (1 + wobble * ((i % 3) - 1)), cand * (1 - wobble * ((i % 4) - 1.5) / 2)) for i in range(n)]


def timed(**ops: list[list[tuple[float, float]]]) -> dict:
    return {k: {"op": k, "inputs": ["float32[32, 128]"], "count": 2, "pairs": pairs} for k, pairs in ops.items()}


def test_op_latency_names_an_op_every_pair_reads_slower_beyond_the_factor() -> None:
    j = optiming.judge(timed(**{"aten.gelu.default": [rounds(0.011, 0.044)] * 2,
                                "aten.addmm.default": [rounds(0.02, 0.0201)] * 2}))
    assert j.state == "slower" and [r["op"] for r in j.flagged] == ["aten.gelu.default"]
    assert j.reason.startswith("aten.gelu.default float32[32, 128] 4.0") and "1 of 2 ops timed" in j.reason
    assert "in 2 fresh process pairs" in j.reason and "warns" in j.reason and j.details.startswith("aten.gelu.default")
    row = j.flagged[0]
    assert row["ci_low"] > optiming.FACTOR and len(row["pair_ratios"]) == 2 and row["rounds"] == 16


@pytest.mark.parametrize(("case", "pairs"), [
    ("one pair of two only", [rounds(0.011, 0.044), rounds(0.011, 0.0115)]),
    ("one pair in all", [rounds(0.011, 0.044)]),
    ("below the factor", [rounds(0.011, 0.0132)] * 2),  # 1.2x, significant, under 1.25x
    ("under a microsecond a call", [rounds(0.0005, 0.0012)] * 2),  # 2.4x of a view's dispatch
])
def test_op_latency_does_not_name_an_op_short_of_any_rule(case: str, pairs: list) -> None:
    j = optiming.judge(timed(**{"aten.t.default": pairs}))
    assert j.state == "unchanged" and not j.flagged, case
    assert j.reason.startswith("1 op timed at the baseline's shapes") and "none slower beyond 1.25×" in j.reason


def test_op_latency_corrects_for_the_number_of_ops_judged() -> None:
    """Four rounds a pair all slower give p = 2^-8 = 0.0039: enough for one op at 1%, not for one of fifty."""
    slow = [rounds(0.011, 0.044, n=4)] * 2
    assert optiming.judge(timed(**{"aten.gelu.default": slow})).state == "slower"
    many = {"aten.gelu.default": slow, **{f"aten.op{i}.default": [rounds(0.01, 0.01, n=4)] * 2 for i in range(49)}}
    assert optiming.judge(timed(**many)).state == "unchanged"
    assert optiming.judge({}).state == "nothing"


def test_op_latency_results_warn_at_most_and_say_what_was_not_timed() -> None:
    spec = CheckSpec("mlp", "op-latency", "cpu", "float32", params={"store": "/tmp/out/baseline-outputs"})
    track = op_timing.OpTrack(spec, keys=["g"], ops=timed(g=[rounds(0.011, 0.044)] * 2),
                              not_timed={"c": "changes its inputs (not timed)"}, recorded={"ops_recorded": 46})
    base, cand = op_timing.results(track)
    assert (base.outcome, cand.outcome) == (Outcome.PASSED, Outcome.SUSPICIOUS) and cand.fail_kind == "correctness"
    assert cand.metrics["slower_ops"] == ["g float32[32, 128]"] and "1 not timed" in cand.reason
    assert cand.thresholds["op_latency_factor"] == optiming.FACTOR and "46 calls recorded" in base.reason
    assert str(op_timing.ops_file(spec)) == "/tmp/out/baseline-outputs/mlp-float32-cpu.ops.pt"  # cross-version's
    skipped = op_timing.results(op_timing.OpTrack(spec, skipped="the baseline's aten ops could not be recorded"))
    assert [r.outcome for r in skipped] == [Outcome.SKIPPED, Outcome.SKIPPED]
    crashed = op_timing.OpTrack(spec, failed=(Observation(spec.id, "crash", message="the worker crashed: SIGSEGV"),
                                              Observation(spec.id, "skipped", message="the other side failed first")))
    assert [r.outcome for r in op_timing.results(crashed)] == [Outcome.ERROR, Outcome.SKIPPED]


def test_op_latency_names_the_ops_only_the_candidate_could_not_time_and_never_passes_on_them() -> None:
    """Issue 46 item 6: an op that raises on the candidate alone was left out of the comparison and the check passed
    on the ops that remained ("unchanged", "1 not timed"); all of them raising left it skipped. Both warn, naming the
    op and what the candidate raised; an op neither side times (it changes its inputs) is only counted."""
    spec = CheckSpec("mlp", "op-latency", "cpu", "float32", params={"store": "/tmp/out/baseline-outputs"})
    raised = "NotImplementedError: Could not run 'aten::gelu' with arguments from the 'CPU' backend"

    def row(key: str, op: str, **seen: object) -> dict:
        return {"key": key, "op": op, "inputs": ["float32[32, 128]"], "count": 2, **seen}

    def answer(*rows: dict) -> Observation:
        return Observation(spec.id, "ok", metrics={"ops": list(rows)})

    def track(candidate_mm: dict) -> op_timing.OpTrack:
        t = op_timing.OpTrack(spec, keys=["g", "m", "c"])
        copy = row("c", "aten.copy_.default", not_timed="changes its inputs (not timed)")
        op_timing._timed(t, answer(row("g", "aten.gelu.default", ms=0.01), row("m", "aten.mm.default", ms=0.02), copy),
                         "b")
        op_timing._timed(t, answer(row("g", "aten.gelu.default", error=raised), candidate_mm, copy), "c")
        return t

    some = track(row("m", "aten.mm.default", ms=0.02))
    some.ops["m"]["pairs"] = [rounds(0.02, 0.02)] * 2
    _, cand = op_timing.results(some)
    assert cand.outcome is Outcome.SUSPICIOUS, cand.reason
    assert cand.reason.startswith("1 op the baseline timed could not be timed on the candidate, so its latency was "
                                  f"never compared: aten.gelu.default float32[32, 128] ({raised}); 1 op timed at "
                                  "the baseline's shapes"), cand.reason
    assert cand.metrics["ops_failed_on_candidate"] == {"g": raised} and "2 not timed" in cand.reason
    assert cand.details.startswith(f"not timed on the candidate: aten.gelu.default float32[32, 128]: {raised}")
    none = track(row("m", "aten.mm.default", error=raised.replace("gelu", "mm")))
    _, cand = op_timing.results(none)
    assert cand.outcome is Outcome.SUSPICIOUS and cand.reason.startswith("2 ops the baseline timed could not be "
                                                                         "timed on the candidate"), cand.reason
    assert cand.reason.endswith("no recorded op could be timed on both sides; 3 not timed (see report.json)")


def test_op_latency_is_planned_beside_each_latency_check_and_only_selects_by_its_own_name(tmp_path) -> None:
    def ids(*only: str) -> list[str]:
        settings = session.Settings(workloads=BUILTIN, only=only, out=tmp_path)
        return [s.id for s in compare.op_latency_specs(settings, "cpu", tmp_path)]

    latency = [s.id for s in session.plan(session.Settings(workloads=BUILTIN, out=tmp_path), "cpu", aspects=["latency"])]
    assert ids() == [i.replace("/latency", "/op-latency") for i in latency]
    assert ids("mlp[float32]/latency") == [] and ids("latency") == []
    assert ids("mlp[float32]/op-latency") == ids("op-latency")[:1] == ["mlp[float32]/op-latency"]
    assert ids("mlp") == ["mlp[float32]/op-latency"]
