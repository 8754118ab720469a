"""A slower forward's attribution to aten ops (orchestrate.attribute's `op_attribution` metric), for the job summary
(a table, shown open right under the A/B table that holds its check) and for JUnit's body (lines of text)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from torch_upgrade_check.analysis.attribution import LEVEL, SURE_P, label, lead, ms, op_line, percent
from torch_upgrade_check.model import CheckResult
from torch_upgrade_check.report import number, visible
from torch_upgrade_check.report.markdown import md, row_line, table_header


def table_of(r: CheckResult) -> Mapping[str, Any] | None:
    table = r.metrics.get("op_attribution")
    return table if isinstance(table, Mapping) else None


def _about(table: Mapping[str, Any]) -> str:
    rounds = table.get("rounds") or [0, 0]
    total = table.get("total") or {}
    what = "device time of its kernels" if table.get("time") == "device" else "self time"
    calls = number(table.get("calls"))
    return (f"each side's forward profiled op by op (torch.profiler, {what} per forward call, "
            f"{f'{calls:g}' if calls else '?'} calls a side a round) in {rounds[0]} fresh process pairs, interleaved; the "
            f"profiled forward {ms(total.get('baseline_ms'))} → {ms(total.get('candidate_ms'))}. " + _shares(table)
            + f"; intervals cover at least {LEVEL:.0%} (Mann–Whitney, over the rounds); sure: one-sided p ≤ {SURE_P:g}")


def _shares(table: Mapping[str, Any]) -> str:
    """What the shares are of: the A/B's slowdown, the profiled forward's change, or nothing (the A/B is not slower)."""
    if table.get("ab_not_slower"):
        return "No shares: the A/B did not find the candidate slower, so the ops are its largest changes either way"
    if table.get("share_of") == "ab":
        return f"Shares are of the slowdown the A/B measured ({ms(number(table.get('slowdown_ms')))} a forward)"
    return "Shares are of that change"


def _lead_first(table: Mapping[str, Any], rows: list[Mapping[str, Any]]) -> bool:
    """Whether the lead line goes above the rows: no rows, a profile that was not slower, or an A/B not slower."""
    total = table.get("total") or {}
    return not rows or not (number(total.get("change_ms")) or 0) > 0 or bool(table.get("ab_not_slower"))


def markdown_block(r: CheckResult, run: str) -> str:
    """"**Where the time went** …" and a table of the top ops, largest slowdown first; "" without an attribution."""
    table = table_of(r)
    if table is None:
        return ""
    head = f"**Where the time went: {md(visible(r.id))} on {md(run)}** — {md(_about(table))}.\n\n"
    rows = [row for row in table.get("ops") or [] if isinstance(row, Mapping)]
    notes = [md(table["error"])] if table.get("error") else []
    if _lead_first(table, rows):
        notes.insert(0, md(lead(table)))
    text = head + "".join(f"{n}\n\n" for n in notes)
    if not rows:
        return text
    text += table_header(["op", "inputs", "baseline", "candidate", "ratio", f"change ({LEVEL:.0%} interval)",
                          "share" if table.get("ab_not_slower") else "share of the slowdown", "p"])
    for row in rows:
        name = str(row.get("op"))
        inputs = label({**row, "op": ""}).strip()
        ratio = number(row.get("ratio"))
        change = f"{_signed(row.get('change_ms'))}" + (
            f" ({_signed(row.get('low_ms'))} to {_signed(row.get('high_ms'))})" if row.get("low_ms") is not None else "")
        share = percent(row.get("share")) if row.get("share") is not None else "—"
        if row.get("share_low") is not None:
            share += f" ({percent(row['share_low'])}–{percent(row['share_high'])})"
        p = f"{number(row.get('p')) or 1.0:.2g}" + (" sure" if row.get("sure") else "")
        text += row_line([md(name), md(inputs) or "—", md(ms(row.get("baseline_ms"))), md(ms(row.get("candidate_ms"))),
                          f"{ratio:.2f}×" if ratio is not None and math.isfinite(ratio) else "new", md(change),
                          md(share), md(p)])
    return text + _not_listed(table) + "\n"


def _not_listed(table: Mapping[str, Any]) -> str:
    n = int(number(table.get("not_listed")) or 0)
    if not n:
        return ""
    share, change = number(table.get("min_share")), number((table.get("total") or {}).get("change_ms")) or 0
    under = f", each under {share:.0%} of the change" if share and change > 0 else ""
    return f"\n{n} more op{'s' if n != 1 else ''} not listed{under}.\n"


def _signed(value: Any) -> str:
    v = number(value)
    return "?" if v is None else ("+" if v > 0 else "−" if v < 0 else "") + ms(abs(v))


def text_block(r: CheckResult) -> str:
    """The same for a text body (JUnit): the about line, then one line an op."""
    table = table_of(r)
    if table is None:
        return ""
    lines = [f"where the time went: {_about(table)}"]
    if table.get("error"):
        lines.append(str(table["error"]))
    total = table.get("total") or {}
    rows = [row for row in table.get("ops") or [] if isinstance(row, Mapping)]
    if _lead_first(table, rows):
        lines.append(lead(table))
    lines += [f"- {op_line(row, total)}" for row in rows]
    return "\n".join([*lines, _not_listed(table).strip()]).strip()
