"""The compile-cache rule: a fresh process compiling from the cold compile's Inductor caches must not crash and must
give the cold compile's outputs; that it loaded nothing is said (pure).

- the warm process raised, crashed or timed out: failed, naming what it raised (its traceback in the details);
- its outputs differ from the cold compile's: failed, naming the tensors (bitwise where the cold compile repeats
  itself bitwise, else within the dtype's tolerance: worker.compilecache says why);
- it hit neither cache although the cold compile saved entries, or it missed some: suspicious (a restart compiles
  again; nothing computed is wrong, and the warm compile time says what it costs);
- nothing was cached (torch bypassed its caches for these graphs): passes, saying so;
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
    if not m.get("warm_equal"):
        how = "bitwise" if m.get("rule") == "bitwise" else f"within rtol {m.get('rtol')}, atol {m.get('atol')}"
        first = ", ".join(m.get("first_differing") or [])
        return Outcome.FAILED, (f"compiled from the cache ({hits_text(warm)}), a fresh process gives other outputs than "
                                f"the cold compile: {m.get('differing_tensors')} of {m.get('compared_tensors')} tensors "
                                f"differ {how} (first: {first}; max abs diff {short(m.get('max_abs_diff'))})"), thresholds
    times = (f"warm compile {short(m.get('warm_compile_s'))} s, cold {short(m.get('cold_compile_s'))} s")
    same = ("bitwise equal to the cold compile's" if m.get("rule") == "bitwise"
            else "within tolerance of the cold compile's (the cold compile does not repeat itself bitwise)")
    if not hits and not saved:
        bypassed = int(cold.get("fx_bypass", 0)) + int(cold.get("aot_bypass", 0))
        return Outcome.PASSED, (f"nothing was cached: this torch's caches bypassed these graphs ({bypassed} "
                                f"bypass{'es' if bypassed != 1 else ''}), so every process compiles them cold; outputs "
                                f"{same}; {times}"), thresholds
    if not hits or misses:
        what = ("hit neither cache" if not hits else f"loaded {hits_text(warm)} but missed {misses}")
        return Outcome.SUSPICIOUS, (f"a fresh process {what} though the cold compile saved {saved} entr"
                                    f"{'ies' if saved != 1 else 'y'}: it compiled again; outputs {same}; "
                                    f"{times}"), thresholds
    return Outcome.PASSED, f"a fresh process loaded {hits_text(warm)}; outputs {same}; {times}", thresholds


def hits_text(warm: Mapping[str, Any]) -> str:
    fx, aot = int(warm.get("fx_hit", 0)), int(warm.get("aot_hit", 0))
    return (f"{fx} Inductor graph{'s' if fx != 1 else ''} from the FX graph cache, {aot} AOTAutograd "
            f"entr{'ies' if aot != 1 else 'y'}")
