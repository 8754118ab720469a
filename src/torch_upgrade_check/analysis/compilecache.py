"""The compile-cache rule: a fresh process compiling from the cold compile's Inductor caches must not crash and must
give the cold compile's outputs; that it loaded nothing is said (pure).

- the warm process raised, crashed or timed out: failed, naming what it raised (its traceback in the details);
- its outputs are beyond the dtype's tolerance of the cold compile's: failed, naming the tensors, whatever it hit;
- it loaded every graph from the caches (no miss) and its outputs differ from the cold compile's: failed (bitwise where
  the cold compile repeats itself bitwise, else within the dtype's tolerance: worker.compilecache says why): a cache
  hit runs the cold compile's own kernels;
- nothing was cached (torch bypassed its caches for these graphs): skipped, saying so: no process loads anything, so
  the cache path this check exists for was never compared (a second cold compile's outputs are said beside; beyond
  tolerance they fail, above);
- it hit neither cache although the cold compile saved entries, or it missed some: suspicious (a restart compiles
  again; the warm compile time says what it costs). Outputs within the dtype's tolerance but not bitwise the cold
  compile's are suspicious too, not failed: a process that missed compiled afresh, and under max-autotune a fresh
  compile may benchmark its way to another kernel;
- otherwise passes, with both compile times.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch_upgrade_check.analysis.closeness import short
from torch_upgrade_check.model import Outcome


def judge(m: Mapping[str, Any]) -> tuple[Outcome, str, dict[str, Any]]:
    cold, warm = m.get("cold_cache") or {}, m.get("warm_cache") or {}
    hits, misses = int(warm.get("fx_hit", 0)) + int(warm.get("aot_hit", 0)), int(warm.get("fx_miss", 0)) + int(
        warm.get("aot_miss", 0))
    saved = int(cold.get("fx_miss", 0)) + int(cold.get("aot_saved", 0))  # an FX graph cache miss is saved
    thresholds = {"rule": m.get("rule", "bitwise"), **{k: m[k] for k in ("rtol", "atol") if k in m}}
    if m.get("warm_error"):
        fx = int(warm.get("fx_hit", 0))
        loaded = f" (after {fx} FX graph cache hit{'s' if fx != 1 else ''})" if fx else ""
        return Outcome.FAILED, (f"a fresh process compiling from the cold compile's Inductor cache {m['warm_error']}"
                                f"{loaded}"), thresholds
    missed = misses > 0 or not hits
    within = m.get("warm_within_tolerance", m.get("rule") == "tolerance" and m.get("warm_equal"))
    if not m.get("warm_equal") and (not missed or not within):
        return Outcome.FAILED, _differs(m, warm, missed, hits), thresholds
    times = (f"warm compile {short(m.get('warm_compile_s'))} s, cold {short(m.get('cold_compile_s'))} s")
    same = ("bitwise equal to the cold compile's" if m.get("warm_equal") and m.get("rule") == "bitwise"
            else "within tolerance of the cold compile's (the cold compile does not repeat itself bitwise)"
            if m.get("warm_equal") else
            (f"within rtol {m.get('rtol')}, atol {m.get('atol')} of the cold compile's but not bitwise "
             f"({m.get('differing_tensors')} of {m.get('compared_tensors')} tensors differ, max abs diff "
             f"{short(m.get('max_abs_diff'))}: a fresh compile, as under max-autotune, may pick other kernels)"))
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


def _differs(m: Mapping[str, Any], warm: Mapping[str, Any], missed: bool, hits: int) -> str:
    """A failure's reason: a hit that differs at all, or a miss (a fresh compile) beyond the dtype's tolerance."""
    first = ", ".join(m.get("beyond_tolerance") or m.get("first_differing") or [])
    if not missed:
        how = "bitwise" if m.get("rule") == "bitwise" else f"within rtol {m.get('rtol')}, atol {m.get('atol')}"
        return (f"compiled from the cache ({hits_text(warm)}), a fresh process gives other outputs than the cold "
                f"compile: {m.get('differing_tensors')} of {m.get('compared_tensors')} tensors differ {how} (first: "
                f"{first}; max abs diff {short(m.get('max_abs_diff'))})")
    what = "hit neither cache" if not hits else f"loaded {hits_text(warm)} but missed some"
    beyond = m.get("beyond_tolerance_tensors") or m.get("differing_tensors")
    return (f"a fresh process that {what} compiled again and gives outputs beyond rtol {m.get('rtol')}, atol "
            f"{m.get('atol')} of the cold compile's: {beyond} of {m.get('compared_tensors')} tensors (first: {first}; "
            f"max abs diff {short(m.get('max_abs_diff'))}): another kernel a fresh compile picks must still be "
            f"within the dtype's tolerance")


def hits_text(warm: Mapping[str, Any]) -> str:
    fx, aot = int(warm.get("fx_hit", 0)), int(warm.get("aot_hit", 0))
    return (f"{fx} Inductor graph{'s' if fx != 1 else ''} from the FX graph cache, {aot} AOTAutograd "
            f"entr{'ies' if aot != 1 else 'y'}")
