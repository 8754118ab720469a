"""The compile-cache aspect's typed metrics and rule (pure): a fresh process compiling from the cold compile's
Inductor caches must not crash and must give the cold compile's outputs; that it loaded nothing is said.

- the warm process raised, crashed or timed out: failed, naming what it raised (its traceback in the details);
- its outputs are beyond the dtype's tolerance of the cold compile's: failed, naming the tensors, whatever it hit;
- it loaded every graph from the caches (no miss) and its outputs differ from the cold compile's: failed (bitwise where
  the cold compile repeats itself bitwise, else within the dtype's tolerance: aspects.compile_cache.run says why): a cache
  hit runs the cold compile's own kernels;
- nothing was cached (torch bypassed its caches for these graphs): skipped, saying so: no process loads anything, so
  the cache path this check exists for was never compared (a second cold compile's outputs are said beside; beyond
  tolerance they fail, above);
- it hit neither cache although the cold compile saved entries, or it missed some: suspicious (a restart compiles
  again; the warm compile time says what it costs). Outputs within the dtype's tolerance but not bitwise the cold
  compile's are suspicious too, not failed: a process that missed compiled afresh, and under max-autotune a fresh
  compile may benchmark its way to another kernel;
- otherwise passes, with both compile times.
In compare, a candidate whose warm process loads none of what the baseline's loaded is suspicious (`judge_in_compare`:
every restart compiles cold), judged also where the candidate was skipped for caching nothing
(`judged_in_compare_though_skipped`). The details are the warm process's own words (`details`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace

from torch_upgrade_check.analysis.closeness import short
from torch_upgrade_check.aspects._metrics import Judged, Recorded
from torch_upgrade_check.model import CheckResult, CheckSpec, Outcome, Report, Side


@dataclass(frozen=True)
class Metrics(Recorded):
    """A compile-cache check's metrics (worker: aspects.compile_cache.run): each process's cache counters and compile
    time, what the warm process raised or printed, and its outputs against the cold compile's."""

    cold_cache: Mapping[str, int] | None = None
    warm_cache: Mapping[str, int] | None = None
    cold_compile_s: float | None = None
    warm_compile_s: float | None = None
    rule: str | None = None  # "bitwise" or "tolerance"
    rtol: float | None = None
    atol: float | None = None
    warm_error: str | None = None
    warm_traceback: str | None = None
    warm_tail: str | None = None
    warm_equal: bool | None = None
    warm_within_tolerance: bool | None = None
    differing_tensors: int | None = None
    compared_tensors: int | None = None
    beyond_tolerance_tensors: int | None = None
    max_abs_diff: float | str | None = None  # "nan", "inf" as report.json writes them
    beyond_tolerance: Sequence[str] | None = None
    first_differing: Sequence[str] | None = None


def judge(m: Metrics, spec: CheckSpec | None = None) -> Judged:
    """The outcome, its one-line reason and the thresholds used (the rule, and the dtype's tolerances)."""
    return Judged(*_judge(m))


def details(m: Metrics) -> str:
    """The warm process's own words: its traceback, or its output's last lines."""
    return str(m.warm_traceback or m.warm_tail or "")


def _judge(m: Metrics) -> tuple[Outcome, str, dict[str, object]]:
    cold, warm = m.cold_cache or {}, m.warm_cache or {}
    hits, misses = int(warm.get("fx_hit", 0)) + int(warm.get("aot_hit", 0)), int(warm.get("fx_miss", 0)) + int(
        warm.get("aot_miss", 0))
    saved = int(cold.get("fx_miss", 0)) + int(cold.get("aot_saved", 0))  # an FX graph cache miss is saved
    thresholds = {"rule": m.rule if m.has("rule") else "bitwise", **{k: getattr(m, k) for k in ("rtol", "atol") if m.has(k)}}
    if m.warm_error:
        fx = int(warm.get("fx_hit", 0))
        loaded = f" (after {fx} FX graph cache hit{'s' if fx != 1 else ''})" if fx else ""
        return Outcome.FAILED, (f"a fresh process compiling from the cold compile's Inductor cache {m.warm_error}"
                                f"{loaded}"), thresholds
    missed = misses > 0 or not hits
    within = m.warm_within_tolerance if m.has("warm_within_tolerance") else m.rule == "tolerance" and m.warm_equal
    if not m.warm_equal and (not missed or not within):
        return Outcome.FAILED, _differs(m, warm, missed, hits), thresholds
    times = (f"warm compile {short(m.warm_compile_s)} s, cold {short(m.cold_compile_s)} s")
    same = ("bitwise equal to the cold compile's" if m.warm_equal and m.rule == "bitwise"
            else "within tolerance of the cold compile's (the cold compile does not repeat itself bitwise)"
            if m.warm_equal else
            (f"within rtol {m.rtol}, atol {m.atol} of the cold compile's but not bitwise "
             f"({m.differing_tensors} of {m.compared_tensors} tensors differ, max abs diff "
             f"{short(m.max_abs_diff)}: a fresh compile, as under max-autotune, may pick other kernels)"))
    if not hits and not saved:
        bypassed = int(cold.get("fx_bypass", 0)) + int(cold.get("aot_bypass", 0))
        return Outcome.SKIPPED, (f"nothing was cached: this torch's caches bypassed these graphs ({bypassed} "
                                 f"bypass{'es' if bypassed != 1 else ''}), so no process loads them and a load from "
                                 f"the cache, what this check compares, never happened; a second cold compile's "
                                 f"outputs {same}; {times}"), thresholds
    if missed:
        what = ("hit neither cache" if not hits else f"loaded {hits_text(warm)} but missed {misses}")
        return Outcome.SUSPICIOUS, (f"a fresh process {what} though the cold compile saved {saved} entr"
                                    f"{'ies' if saved != 1 else 'y'}: it compiled again; outputs {same}; "
                                    f"{times}"), thresholds
    return Outcome.PASSED, f"a fresh process loaded {hits_text(warm)}; outputs {same}; {times}", thresholds


def _differs(m: Metrics, warm: Mapping[str, int], missed: bool, hits: int) -> str:
    """A failure's reason: a hit that differs at all, or a miss (a fresh compile) beyond the dtype's tolerance."""
    first = ", ".join(m.beyond_tolerance or m.first_differing or [])
    if not missed:
        how = "bitwise" if m.rule == "bitwise" else f"within rtol {m.rtol}, atol {m.atol}"
        return (f"compiled from the cache ({hits_text(warm)}), a fresh process gives other outputs than the cold "
                f"compile: {m.differing_tensors} of {m.compared_tensors} tensors differ {how} (first: "
                f"{first}; max abs diff {short(m.max_abs_diff)})")
    what = "hit neither cache" if not hits else f"loaded {hits_text(warm)} but missed some"
    beyond = m.beyond_tolerance_tensors or m.differing_tensors
    return (f"a fresh process that {what} compiled again and gives outputs beyond rtol {m.rtol}, atol "
            f"{m.atol} of the cold compile's: {beyond} of {m.compared_tensors} tensors (first: {first}; "
            f"max abs diff {short(m.max_abs_diff)}): another kernel a fresh compile picks must still be "
            f"within the dtype's tolerance")


def hits_text(warm: Mapping[str, int]) -> str:
    fx, aot = int(warm.get("fx_hit", 0)), int(warm.get("aot_hit", 0))
    return (f"{fx} Inductor graph{'s' if fx != 1 else ''} from the FX graph cache, {aot} AOTAutograd "
            f"entr{'ies' if aot != 1 else 'y'}")


def judged_in_compare_though_skipped(before: CheckResult | None, after: CheckResult) -> bool:
    """A candidate skipped because it cached nothing (its warm process ran: `warm_cache` is there), where the
    baseline's passed: judged against the baseline's hits as a pass is."""
    return (after.outcome is Outcome.SKIPPED and "warm_cache" in after.metrics and before is not None
            and before.outcome is Outcome.PASSED)


def judge_in_compare(before: CheckResult, after: CheckResult, baseline: Report, candidate: Report,
                     fail_on: Collection[str]) -> CheckResult:
    """A candidate whose caches bypass graphs the baseline's warm process loaded from them: nothing is wrong, but
    every restart compiles cold again (suspicious)."""
    hits = {side: sum(int((Metrics.from_dict(r.metrics).warm_cache or {}).get(k, 0)) for k in ("fx_hit", "aot_hit"))
            for side, r in ((Side.BASELINE, before), (Side.CANDIDATE, after))}
    if hits[Side.CANDIDATE] or not hits[Side.BASELINE]:
        return after
    return replace(after, outcome=Outcome.SUSPICIOUS,
                   reason=f"{after.reason}; baseline {baseline.label}'s warm process loaded {hits[Side.BASELINE]} cached "
                          f"graphs and entries: this torch caches none of them, so every restart compiles cold")
