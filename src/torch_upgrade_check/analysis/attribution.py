"""Which aten ops a latency change lives in: both sides' profiled forwards, op by op (pure, torch-free).

Input: each side's profiles, one per fresh worker process (the rounds of `orchestrate.attribute`, interleaved as the
A/B is). A profile is what `worker.opprofile` returns: the forward's wall time per call (`wall_ms`) and, per aten op
at its input shapes and dtypes, its self time per forward call (`ms`: time in the op less its child ops, so a
linear's addmm is counted once, in addmm); ops past the worker's cap are summed in `other_ms`. What no op's self time
covers (Python, module calls, the profiler's own cost) is a row of its own, OUTSIDE, so a slowdown above the kernels
is named as such rather than spread over the ops.

Per op and side: the median over the rounds (an op a round did not see counts 0 there); the change is the two-sample
Hodges-Lehmann shift (the median of all candidate-minus-baseline differences of its rounds) with its distribution-free
interval from the Mann-Whitney distribution (`stats.shift_interval`, at least LEVEL coverage), and the exact one-sided
Mann-Whitney p that the candidate's rounds lie above the baseline's. Each round is a fresh process, so the interval
holds process-level variation, the largest here (Kalibera & Jones). With 3 rounds a side the 90% interval is the
range of the 9 differences and p is at best 0.05; 4 rounds give p 0.014 at best. Fewer than 3 rounds a side give no
interval (said). An op's share is its change over the slowdown the A/B measured (its medians' difference a forward,
from many rounds in several fresh pairs, unprofiled), else over the profiled forward's own change (wall per call,
the same rounds); its interval is the op's interval over that point figure (the slowdown's own uncertainty is not in
it). Why the A/B's: the profiled wall per forward carries what no op does (a process preempted between ops, the
profiler's own cost): on the shared 2-core machine (load 4-5), over 10 runs of mlp with gelu 2x and 4x slower
(benchmarks/op_detector.py), gelu's change read 75%-730% of the profiled forward's and 58%-166% of the A/B's. The
op's own change is measured under the profiler, whose cost per op is the same on both sides. A profiled forward that
is not slower names no op (it did not reproduce the change). The A/B's figures stay the model-level verdict, and the
words follow them: where the A/B did not find the candidate slower (its point estimate not above the baseline's, or
its state unchanged or improved; an `undecided` check can read faster), nothing is a share of a slowdown: the ops
that changed most either way are named as changes, and the line says the candidate is not slower overall.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from torch_upgrade_check.analysis import stats

LEVEL = 0.90  # each figure's interval covers at least this (5% missing on each side)
SURE_P = 0.05  # an op's change is called sure when its one-sided Mann-Whitney p is at most this
TOP = 10  # ops kept in the table (by change, largest slowdown first) ...
MIN_SHARE = 0.01  # ... of those whose change is at least this share of the forward's (a view op's 0.05 µs is not news)
UNSLOWED_TOP = 3  # ops kept where the profiled forward was not slower (nothing to share out)
FEWEST = 3  # rounds a side below which no interval is given
NOT_SLOWER = ("unchanged", "improved")  # the A/B states (model.ABState's words) that say the candidate is not slower
OUTSIDE = "(outside aten ops)"
OTHER = "(other ops, past the profile's cap)"


def key_of(op: Mapping[str, Any]) -> str:
    """One op at its inputs: name, shapes and dtypes (the rows of the table)."""
    return json.dumps([op.get("op"), op.get("shapes") or [], op.get("dtypes") or []])


def label(op: Mapping[str, Any]) -> str:
    """"aten::topk [64, 32000] float32"; "aten::addmm [128], [32, 64], [64, 128] float32"; dtypes listed where they
    differ."""
    shapes = ", ".join(f"[{', '.join(str(d) for d in s)}]" for s in op.get("shapes") or [])
    dtypes = [str(d) for d in op.get("dtypes") or [] if d]
    kinds = " ".join(dict.fromkeys(dtypes)) if len(set(dtypes)) == 1 else ", ".join(dtypes)
    return " ".join(p for p in (str(op.get("op")), shapes, kinds) if p)


def _series(profiles: Sequence[Mapping[str, Any]]) -> dict[str, list[float]]:
    """Per op key, its ms per forward in each round (0 where a round did not see it), and the two pseudo-ops."""
    keys: dict[str, Mapping[str, Any]] = {}
    for p in profiles:
        for op in p.get("ops") or []:
            keys.setdefault(key_of(op), op)
    series: dict[str, list[float]] = {k: [] for k in keys}
    series[OUTSIDE], series[OTHER], series[""] = [], [], []
    for p in profiles:
        seen: dict[str, float] = {}
        for op in p.get("ops") or []:
            seen[key_of(op)] = seen.get(key_of(op), 0.0) + float(op.get("ms") or 0.0)
        for k in keys:
            series[k].append(seen.get(k, 0.0))
        wall, other = float(p.get("wall_ms") or 0.0), float(p.get("other_ms") or 0.0)
        series[OTHER].append(other)
        series[OUTSIDE].append(wall - sum(seen.values()) - other)
        series[""].append(wall)
    return series


def _figure(b: Sequence[float], c: Sequence[float], fewest: int) -> dict[str, Any]:
    """Medians, the Hodges-Lehmann change with its interval (None below `fewest` rounds a side), ratio and p."""
    base, cand = stats.median(b), stats.median(c)
    change = stats.median([y - x for x in b for y in c])
    low, high = stats.shift_interval(b, c, (1 - LEVEL) / 2) if min(len(b), len(c)) >= fewest else (None, None)
    if low is not None and not (math.isfinite(low) and math.isfinite(high)):
        low = high = None
    return {"baseline_ms": base, "candidate_ms": cand, "change_ms": change, "low_ms": low, "high_ms": high,
            "ratio": cand / base if base > 0 else None, "p": stats.mann_whitney_p(b, c),
            "baseline_rounds_ms": [round(x, 6) for x in b], "candidate_rounds_ms": [round(x, 6) for x in c]}


def attribute(baseline: Sequence[Mapping[str, Any]], candidate: Sequence[Mapping[str, Any]], *, top: int = TOP,
              fewest: int = FEWEST, slowdown_ms: float | None = None, ab_ms: tuple[float, float] | None = None,
              change: str | None = None) -> dict[str, Any]:
    """The table: the profiled forward's change (`total`) and the `top` ops by change (largest slowdown first), each
    with medians, change, interval, ratio, p, share and whether it is sure; JSON-ready. Shares are of `slowdown_ms`
    (the A/B's, a forward; from `ab_ms`, its baseline and candidate medians, where given) where it is positive, else
    of the profiled forward's change (`share_of` says which). Where the A/B is not slower (`slowdown_ms` <= 0, or
    `change` unchanged or improved) there are no shares (`share_of` "none", `ab_not_slower`): the ops that changed
    most either way are kept, as changes."""
    if ab_ms is not None:
        slowdown_ms = ab_ms[1] - ab_ms[0]
    if not baseline or not candidate:
        return {"rounds": [len(baseline), len(candidate)], "ops": [], "total": None, "level": LEVEL}
    b, c = _series(baseline), _series(candidate)
    ops_by_key = {key_of(op): op for p in (*baseline, *candidate) for op in p.get("ops") or []}
    total = _figure(b[""], c[""], fewest)
    not_slower = (slowdown_ms is not None and not slowdown_ms > 0) or change in NOT_SLOWER
    slower = total["change_ms"] > 0 and not not_slower
    by_ab = slowdown_ms is not None and slowdown_ms > 0
    whole = float(slowdown_ms) if by_ab else total["change_ms"]
    rows = []
    for k in (*ops_by_key, OUTSIDE, OTHER):
        bs, cs = b.get(k) or [0.0] * len(baseline), c.get(k) or [0.0] * len(candidate)
        if k == OTHER and not any(bs) and not any(cs):
            continue
        fig = _figure(bs, cs, fewest)
        op = ops_by_key.get(k)
        row = {"op": op.get("op") if op else k, "shapes": op.get("shapes") or [] if op else [],
               "dtypes": op.get("dtypes") or [] if op else [], **fig}
        row["share"] = fig["change_ms"] / whole if slower else None
        for end in ("low", "high"):
            row[f"share_{end}"] = fig[f"{end}_ms"] / whole if slower and fig[f"{end}_ms"] is not None else None
        row["sure"] = fig["p"] <= SURE_P and fig["low_ms"] is not None and fig["low_ms"] > 0
        rows.append(row)
    # not slower overall: the largest changes either way, a faster op as much as a slower one
    rows.sort(key=lambda r: (-abs(r["change_ms"]) if not_slower else -r["change_ms"], -r["candidate_ms"]))
    kept = ([r for i, r in enumerate(rows[:top]) if i == 0 or r["share"] >= MIN_SHARE] if slower
            else rows[:min(top, UNSLOWED_TOP)])
    table = {"rounds": [len(baseline), len(candidate)], "level": LEVEL, "total": total, "ops_compared": len(ops_by_key),
             "ops": [_rounded(r) for r in kept], "not_listed": len(rows) - len(kept), "min_share": MIN_SHARE,
             "share_of": "none" if not_slower else "ab" if by_ab else "profile", "slowdown_ms": round(whole, 6),
             "ab_not_slower": not_slower}
    if ab_ms is not None:
        table["ab_ms"] = [round(float(v), 6) for v in ab_ms]
    return table


def _rounded(row: dict[str, Any]) -> dict[str, Any]:
    return {k: round(v, 6) if isinstance(v, float) and math.isfinite(v) else v for k, v in row.items()}


def percent(value: float | None) -> str:
    return "?" if value is None else f"{round(value * 100) or 0:.0f}%"


def ms(value: float | None) -> str:
    """A per-call time in the unit that reads best (µs below a millisecond)."""
    if value is None or not math.isfinite(value):
        return "?"
    return f"{value:.3g} ms" if abs(value) >= 1 else f"{value * 1000:.3g} µs"


def op_line(row: Mapping[str, Any], total: Mapping[str, Any] | None) -> str:
    """"aten::gelu [32, 128] float32: 23 µs → 92 µs a forward (4.00×), 96% of the slowdown (90% interval 88–104%;
    p 0.014, sure)"."""
    ratio = row.get("ratio")
    size = f" ({ratio:.2f}×)" if isinstance(ratio, (int, float)) and math.isfinite(ratio) else " (new)"
    text = f"{label(row)}: {ms(row.get('baseline_ms'))} → {ms(row.get('candidate_ms'))} a forward{size}"
    if row.get("share") is not None:
        text += f", {percent(row['share'])} of the slowdown"
        interval = (f"{percent(row['share_low'])}–{percent(row['share_high'])}" if row.get("share_low") is not None
                    else "no interval: fewer than 3 rounds a side")
    else:
        interval = (f"{ms(row['low_ms'])} to {ms(row['high_ms'])}" if row.get("low_ms") is not None
                    else "no interval: fewer than 3 rounds a side")
    sure = "sure" if row.get("sure") else "not sure"
    level = f"{LEVEL:.0%} interval " if "no interval" not in interval else ""
    return f"{text} ({level}{interval}; p {row.get('p', 1.0):.2g}, {sure})"


def lead(table: Mapping[str, Any]) -> str:
    """The line a reader of a slower forward needs first: the top op, or why there is none; where the A/B did not find
    the candidate slower, the largest change, and that the candidate is not slower overall."""
    total, rows = table.get("total"), table.get("ops") or []
    rounds = table.get("rounds") or [0, 0]
    if not total or not rows:
        return "no op profile to attribute the change to"
    if table.get("ab_not_slower"):
        return f"the largest change: {op_line(rows[0], total)}; the candidate is not slower overall{_ab_figure(table)}"
    if total["change_ms"] <= 0:
        return (f"the profiled forwards did not reproduce the slowdown ({ms(total['baseline_ms'])} → "
                f"{ms(total['candidate_ms'])} a forward in {rounds[0]} fresh process pairs): no op to name")
    return f"most of it in {op_line(rows[0], total)}"


def _ab_figure(table: Mapping[str, Any]) -> str:
    """" (the A/B: 1.37 ms → 1.32 ms a forward)", from the table's `ab_ms`; "" without it."""
    figure = table.get("ab_ms")
    if not isinstance(figure, (list, tuple)) or len(figure) != 2:
        return ""
    return f" (the A/B: {ms(figure[0])} → {ms(figure[1])} a forward)"
