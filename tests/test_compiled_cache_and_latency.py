"""torch.compile as teams ship it (issue 33 item 3): a fresh process compiling from a warm Inductor cache
(compile-cache), against a torch broken the way it exists to catch, with the real torch passing; the rules
themselves torch-free. (Item 4, compiled-latency, is tests/aspects/compiled_latency/.)"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from harness import interpreter
from test_checks_catch_breakage import compared, outcomes

from torch_upgrade_check.analysis import compilecache, sides
from torch_upgrade_check.model import CheckResult, Outcome

CACHE = "matmul[float32]/compile-cache"
COLD = "matmul[float32]/compile"


def test_a_warm_cache_hit_that_differs_or_crashes_fails_compile_cache_where_the_real_torch_passes(
        tmp_path: Path, torch_python: str) -> None:
    """The built-in matmul's compile-cache (planned by default: its cold compile builds no C++ kernel). The real torch:
    a fresh process loads the cold compile's graph from the FX graph cache and AOTAutograd's, bitwise equal. A torch
    whose graphs loaded from the FX graph cache compute x(1+1e-3) fails it, while its cold compile (the compile check,
    caches off) passes; one whose cache load raises (pytorch#187484) fails naming the assertion."""
    real = outcomes(torch_python, tmp_path / "real", CACHE)[CACHE]
    assert real["outcome"] == "passed", real["reason"]
    assert real["reason"].startswith("a fresh process loaded 1 Inductor graph from the FX graph cache, 1 AOTAutograd "
                                     "entry; outputs bitwise equal to the cold compile's; warm compile "), real["reason"]
    m = real["metrics"]
    assert (m["rule"], m["cold_repeatable"], m["warm_cache"]["fx_hit"], m["cold_cache"]["fx_miss"]) == ("bitwise", True, 1, 1)
    assert m["cold_compile_s"] > 0 and m["warm_compile_s"] > 0 and m["warm_process_s"] >= m["warm_compile_s"]

    wrong = outcomes(str(interpreter(torch_python, tmp_path / "wrong-py", breaks=["cache-hit-wrong"])), tmp_path / "wrong",
                CACHE, COLD)
    assert wrong[COLD]["outcome"] == "passed", wrong[COLD]["reason"]  # a cold compile is right
    assert wrong[CACHE]["outcome"] == "failed"
    assert wrong[CACHE]["reason"].startswith("compiled from the cache (1 Inductor graph from the FX graph cache, 1 "
                                             "AOTAutograd entry), a fresh process gives other outputs than the cold "
                                             "compile: 1 of 1 tensors differ bitwise (first: output;"), wrong[CACHE]["reason"]

    crashes = outcomes(str(interpreter(torch_python, tmp_path / "crash-py", breaks=["cache-hit-crashes"])),
                  tmp_path / "crash", CACHE)[CACHE]
    assert crashes["outcome"] == "failed"
    assert crashes["reason"].startswith("a fresh process compiling from the cold compile's Inductor cache raised "
                                        "BackendCompilerFailed (AssertionError: tuc cache-hit-crashes: an Inductor "
                                        "assertion on a graph loaded from the FX graph cache)"), crashes["reason"]
    assert "load_with_key" in crashes["details"]  # the warm process's traceback


def test_a_warm_process_that_missed_and_compiled_other_kernels_warns_within_tolerance_and_fails_beyond(
        tmp_path: Path, torch_python: str) -> None:
    """Issue 46 item 5: a torch whose fresh processes miss the caches and compile again, picking other kernels (as
    max-autotune's benchmarks may): outputs 1e-6 off, within float32's tolerance, failed bitwise before the misses were
    read; now suspicious, naming the miss. 1e-2 off fails. (A hit that differs, cache-hit-wrong, still fails: above.)"""
    def cache(retuned: str) -> dict:
        python = interpreter(torch_python, tmp_path / f"py-{retuned}", breaks=["cache-miss-retuned"],
                             options={"TUC_RETUNED": retuned})
        return outcomes(str(python), tmp_path / f"out-{retuned}", CACHE)[CACHE]

    close = cache("1e-6")
    m = close["metrics"]
    assert close["outcome"] == "suspicious", close["reason"]
    assert close["reason"].startswith("a fresh process hit neither cache though the cold compile saved 2 entries: it "
                                      f"compiled again; outputs within rtol {m['rtol']}, atol {m['atol']} of the cold "
                                      "compile's but not bitwise (1 of 1 tensors differ"), close["reason"]
    assert (m["rule"], m["warm_equal"], m["warm_within_tolerance"], m["warm_cache"]["fx_hit"]) == ("bitwise", False,
                                                                                                   True, 0)
    far = cache("1e-2")
    assert far["outcome"] == "failed", far["reason"]
    assert far["reason"].startswith("a fresh process that hit neither cache compiled again and gives outputs beyond "
                                    f"rtol {m['rtol']}, atol {m['atol']} of the cold compile's: 1 of 1 tensors (first: "
                                    "output"), far["reason"]


def test_a_torch_whose_caches_bypass_every_graph_skips_compile_cache_and_compare_warns(tmp_path: Path,
                                                                                       torch_python: str) -> None:
    """Issue 46 item 6: nothing cached, nothing loaded: the check passed on "nothing was cached". It is skipped, saying
    the load was never compared; in compare, against a baseline whose warm process loaded its graphs, it warns."""
    bypassing = str(interpreter(torch_python, tmp_path / "py", breaks=["caches-bypassed"]))
    code, cand = compared(torch_python, bypassing, tmp_path / "out", CACHE)
    result = cand[CACHE]
    assert result["metrics"]["warm_cache"]["fx_hit"] == 0 and result["metrics"]["cold_cache"]["fx_bypass"] >= 1
    assert result["outcome"] == "suspicious" and code == 0, result["reason"]
    assert result["reason"].startswith("nothing was cached: this torch's caches bypassed these graphs ("), result["reason"]
    assert "so no process loads them and a load from the cache, what this check compares, never happened" in \
        result["reason"] and "this torch caches none of them, so every restart compiles cold" in result["reason"]
    alone = outcomes(bypassing, tmp_path / "alone", CACHE)[CACHE]
    assert alone["outcome"] == "skipped", alone["reason"]


def test_the_compile_cache_rule_fails_a_crash_or_other_outputs_and_warns_on_a_cache_not_used() -> None:
    hit = {"warm_cache": {"fx_hit": 3, "aot_hit": 2}, "cold_cache": {"fx_miss": 3, "aot_saved": 2}, "rule": "bitwise",
           "warm_equal": True, "warm_compile_s": 1.0, "cold_compile_s": 6.0}
    outcome, reason, thresholds = compilecache.judge(hit)
    assert (outcome, thresholds) == (Outcome.PASSED, {"rule": "bitwise"})
    assert reason == ("a fresh process loaded 3 Inductor graphs from the FX graph cache, 2 AOTAutograd entries; outputs "
                      "bitwise equal to the cold compile's; warm compile 1 s, cold 6 s")
    differs = {**hit, "warm_equal": False, "differing_tensors": 1, "compared_tensors": 7, "first_differing": ["grad:w"],
               "max_abs_diff": 0.01, "rule": "tolerance", "rtol": 1e-5, "atol": 1e-6}
    outcome, reason, thresholds = compilecache.judge(differs)
    assert outcome is Outcome.FAILED and thresholds == {"rule": "tolerance", "rtol": 1e-5, "atol": 1e-6}
    assert "1 of 7 tensors differ within rtol 1e-05, atol 1e-06 (first: grad:w; max abs diff 0.01)" in reason
    outcome, reason, _ = compilecache.judge({**hit, "warm_error": "did not finish within 120 s"})
    assert (outcome, reason) == (Outcome.FAILED, "a fresh process compiling from the cold compile's Inductor cache did "
                                                 "not finish within 120 s (after 3 FX graph cache hits)")
    outcome, reason, _ = compilecache.judge({**hit, "warm_cache": {}})
    assert outcome is Outcome.SUSPICIOUS and reason.startswith("a fresh process hit neither cache though the cold "
                                                               "compile saved 5 entries: it compiled again")
    outcome, reason, _ = compilecache.judge({**hit, "warm_cache": {"fx_hit": 1, "fx_miss": 2}})
    assert outcome is Outcome.SUSPICIOUS and "but missed 2" in reason
    # issue 46 item 6: nothing cached is nothing loaded, so nothing this check exists for was compared: skipped
    outcome, reason, _ = compilecache.judge({**hit, "warm_cache": {}, "cold_cache": {"fx_bypass": 2}})
    assert outcome is Outcome.SKIPPED and reason.startswith("nothing was cached: this torch's caches bypassed these "
                                                            "graphs (2 bypasses), so no process loads them"), reason
    assert "a second cold compile's outputs bitwise equal to the cold compile's" in reason


def test_a_miss_that_compiled_other_kernels_within_tolerance_warns_and_a_hit_that_differs_fails() -> None:
    """Issue 46 item 5 (max-autotune: a warm process that missed compiles afresh and may pick another kernel): a miss
    whose outputs are within the dtype's tolerance, not bitwise, is suspicious; beyond it, failed; a hit that
    differs at all fails, as before."""
    base = {"cold_cache": {"fx_miss": 1, "aot_saved": 1}, "rule": "bitwise", "rtol": 1.3e-6, "atol": 1e-5,
            "warm_equal": False, "differing_tensors": 1, "compared_tensors": 1, "first_differing": ["output"],
            "max_abs_diff": 2e-6, "warm_compile_s": 1.0, "cold_compile_s": 1.0}
    missed = {**base, "warm_cache": {"fx_miss": 1, "aot_miss": 1}, "warm_within_tolerance": True}
    outcome, reason, _ = compilecache.judge(missed)
    assert outcome is Outcome.SUSPICIOUS, reason
    assert reason.startswith("a fresh process hit neither cache though the cold compile saved 2 entries: it compiled "
                             "again; outputs within rtol 1.3e-06, atol 1e-05 of the cold compile's but not bitwise "
                             "(1 of 1 tensors differ, max abs diff 2e-06: a fresh compile"), reason
    beyond = {**missed, "warm_within_tolerance": False, "beyond_tolerance": ["output"], "beyond_tolerance_tensors": 1,
              "max_abs_diff": 0.5}
    outcome, reason, _ = compilecache.judge(beyond)
    assert outcome is Outcome.FAILED and reason.startswith("a fresh process that hit neither cache compiled again and "
                                                           "gives outputs beyond rtol 1.3e-06, atol 1e-05"), reason
    hit = {**base, "warm_cache": {"fx_hit": 1, "aot_hit": 1}, "warm_within_tolerance": True}
    outcome, reason, _ = compilecache.judge(hit)
    assert outcome is Outcome.FAILED and reason.startswith("compiled from the cache (1 Inductor graph from the FX graph "
                                                           "cache, 1 AOTAutograd entry), a fresh process gives other "
                                                           "outputs than the cold compile: 1 of 1 tensors differ "
                                                           "bitwise"), reason


def test_compare_warns_when_the_candidate_caches_nothing_the_baseline_loaded_from_its_cache() -> None:
    def result(warm: dict) -> CheckResult:
        return CheckResult("m", "compile-cache", "cpu", "float32", Outcome.PASSED, reason="r",
                           metrics={"warm_cache": warm})

    base = result({"fx_hit": 3, "aot_hit": 2})
    judged = sides._cache_no_longer_used(base, result({}), "2.13.0")
    assert judged.outcome is Outcome.SUSPICIOUS
    assert judged.reason == ("r; baseline 2.13.0's warm process loaded 5 cached graphs and entries: this torch caches "
                             "none of them, so every restart compiles cold")
    assert sides._cache_no_longer_used(base, result({"fx_hit": 1}), "2.13.0").outcome is Outcome.PASSED
    assert sides._cache_no_longer_used(result({}), result({}), "2.13.0").outcome is Outcome.PASSED
    # a candidate skipped for caching nothing is judged against the baseline's hits as a pass would be
    skipped = replace(result({}), outcome=Outcome.SKIPPED)
    assert sides._cached_nothing(base, skipped) and not sides._cached_nothing(base, replace(skipped, metrics={}))
