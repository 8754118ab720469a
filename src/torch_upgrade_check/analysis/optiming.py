"""The op-latency judgement (pure): the baseline's recorded aten ops, each timed on both sides at the team's shapes,
and which of them the candidate runs markedly slower, even where the model-level latency passes.

Evidence per op: rounds in fresh baseline/candidate process pairs (orchestrate.optiming), each round one sample a
side of the same number of calls, interleaved ABBA; a round gives d = ln(candidate / baseline). An op is named
(`suspicious`: it warns, never fails) when all of:
- every pair (at least MIN_PAIRS) on its own reads it at least FACTOR slower (its rounds' Hodges-Lehmann estimate):
  an offset that belongs to one process cannot carry it;
- its rounds, pooled, are significantly slower: one-sided Wilcoxon signed-rank p <= ALPHA / the ops judged
  (Bonferroni over the ops, so a clean comparison of 50 ops stays clean);
- it is slower by at least MIN_CHANGE_MS a call: below a microsecond the call from Python (dispatch, argument
  parsing) is what is timed, not a kernel.
The ratio reported is the Hodges-Lehmann estimate over every round with its 95% signed-rank interval; each pair's
own estimate is kept beside it. The check's figure of merit is what it names; the model-level verdict is the latency
check's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from torch_upgrade_check.analysis import stats

FACTOR = 1.25
ALPHA = 0.01
MIN_PAIRS = 2
MIN_CHANGE_MS = 0.001
SHOWN = 5  # ops named in the reason and the details


@dataclass(frozen=True)
class Judgement:
    state: str  # "slower" (some op named: suspicious), "unchanged" (none), "nothing" (no op could be compared)
    reason: str
    rows: list[dict[str, Any]] = field(default_factory=list)  # every op compared, the slowest first
    details: str = ""

    @property
    def flagged(self) -> list[dict[str, Any]]:
        return [r for r in self.rows if r["slower"]]


def label(row: Mapping[str, Any]) -> str:
    """"aten.gelu.default float32[32, 128]"."""
    return f"{row.get('op')} {', '.join(row.get('inputs') or [])}".strip()


def _ms(value: float) -> str:
    return f"{value:.3g} ms" if value >= 1 else f"{value * 1000:.3g} µs"


def judge(ops: Mapping[str, Mapping[str, Any]], *, factor: float = FACTOR, alpha: float = ALPHA,
          min_pairs: int = MIN_PAIRS, min_change_ms: float = MIN_CHANGE_MS) -> Judgement:
    """`ops`: key -> {"op", "inputs", "count", "pairs": [[(baseline_ms, candidate_ms) per round] per pair]}."""
    compared = {k: v for k, v in ops.items() if any(_logs(p) for p in v.get("pairs") or [])}
    if not compared:
        return Judgement("nothing", "no recorded op could be timed on both sides")
    tau, level = math.log(factor), alpha / len(compared)
    rows = []
    for key, op in compared.items():
        pairs = [p for p in op["pairs"] if _logs(p)]
        d = [x for p in pairs for x in _logs(p)]
        per_pair = [stats.hodges_lehmann(_logs(p)) for p in pairs]
        base = stats.median([b for p in pairs for b, _ in p])
        cand = stats.median([c for p in pairs for _, c in p])
        low, high = stats.hl_interval(d, 0.025)
        p_value = stats.signed_rank_p(d, "greater")
        slower = (len(pairs) >= min_pairs and min(per_pair) >= tau and p_value <= level
                  and cand - base >= min_change_ms)
        rows.append({"key": key, "op": op.get("op"), "inputs": list(op.get("inputs") or []), "count": op.get("count"),
                     "baseline_ms": base, "candidate_ms": cand, "ratio": math.exp(stats.hodges_lehmann(d)),
                     "ci_low": math.exp(low) if math.isfinite(low) else None,
                     "ci_high": math.exp(high) if math.isfinite(high) else None,
                     "pair_ratios": [round(math.exp(e), 4) for e in per_pair], "p": p_value, "rounds": len(d),
                     "slower": slower})
    rows.sort(key=lambda r: (not r["slower"], -r["ratio"]))
    pairs_n = max(len(op["pairs"]) for op in compared.values())
    rounds_n = max(r["rounds"] for r in rows)
    flagged = [r for r in rows if r["slower"]]
    how = (f"{len(compared)} op{'s' if len(compared) != 1 else ''} timed at the baseline's shapes in {pairs_n} fresh "
           f"process pair{'s' if pairs_n != 1 else ''} ({rounds_n} rounds)")
    if not flagged:
        top = rows[0]
        return Judgement("unchanged", f"{how}: none slower beyond {factor:.2f}× at the run's confidence (the slowest, "
                                      f"{label(top)}, {top['ratio']:.2f}×)", rows,
                         "\n".join(line(r) for r in rows[:SHOWN]))
    first = flagged[0]
    more = f"; and {len(flagged) - 1} more op{'s' if len(flagged) != 2 else ''}" if len(flagged) > 1 else ""
    reason = (f"{line(first)}{more}: {len(flagged)} of {how} slower beyond {factor:.2f}× (warns: the model-level "
              f"latency is the latency check's verdict)")
    return Judgement("slower", reason, rows, "\n".join(line(r) for r in flagged[:SHOWN]))


def line(row: Mapping[str, Any]) -> str:
    """"aten.gelu.default float32[32, 128] 3.95× slower a call (11.2 µs → 44.3 µs; 95% CI 3.90–4.01×; 3.9× and 4.0×
    in 2 fresh process pairs; called 2 times a forward and backward)"."""
    pairs = [f"{x:.2f}×" for x in row.get("pair_ratios") or []]
    count = int(row.get("count") or 0)
    low, high = row.get("ci_low"), row.get("ci_high")
    interval = f"95% CI {low:.2f}–{high:.2f}×; " if low is not None and high is not None else ""
    return (f"{label(row)} {row['ratio']:.2f}× {'slower' if row['ratio'] >= 1 else 'faster'} a call "
            f"({_ms(row['baseline_ms'])} → {_ms(row['candidate_ms'])}; {interval}"
            f"{' and '.join(pairs)} in {len(pairs)} fresh process pair{'s' if len(pairs) != 1 else ''}; "
            f"called {count} time{'s' if count != 1 else ''} in the recorded forward and backward)")


def _logs(rounds: Sequence[Sequence[float]]) -> list[float]:
    return [math.log(c / b) for b, c in rounds if b > 0 and c > 0]
