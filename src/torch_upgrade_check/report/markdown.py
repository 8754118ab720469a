"""Markdown building blocks of the job summary: escaping, cells, tables of rows, and fitting them in a byte budget."""

from __future__ import annotations

import html
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from torch_upgrade_check.model import CheckResult, Outcome
from torch_upgrade_check.report import clip, number, one_line, sig, visible

# characters of a reason in every table cell: a readable width beside the measured columns; a failing or
# suspicious row's whole reason (whose end is often what to do, "raise ab-budget") is in its <details> block
# below the table (detail_block)
REASON_LIMIT = 160
DETAILS_LIMIT = 3000  # characters of a failing check's details; the tail is kept, where stderr ends
ICON = {Outcome.FAILED: "❌", Outcome.ERROR: "💥", Outcome.NOT_RUN: "⏹️", Outcome.SUSPICIOUS: "⚠️",
        Outcome.SKIPPED: "⏭️", Outcome.PASSED: "✅"}
RANK = {Outcome.FAILED: 0, Outcome.ERROR: 1, Outcome.NOT_RUN: 2, Outcome.SUSPICIOUS: 3, Outcome.SKIPPED: 4,
        Outcome.PASSED: 5}
CHANGE_ICON = {"regression": "🔺", "undecided": "⏳", "suspicious": "⚠️", "improved": "🟢", "unchanged": "➖"}
_MD_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")  # every ASCII punctuation character


def md(text: Any) -> str:
    """Plain text for a Markdown line or table cell: one line, every ASCII punctuation backslash-escaped,
    so pipes, backticks, `<script>`, `&lt;` and emphasis all show literally."""
    return _MD_PUNCTUATION.sub(r"\\\1", one_line(str(text)))


def html_text(text: Any, limit: int = 200) -> str:
    """Text for inside an HTML block line (a <summary>), where Markdown escapes do not apply."""
    return html.escape(clip(one_line(str(text)), limit))


def fenced(text: str, info: str = "") -> str:
    """A code block whose fence is longer than any run of backticks inside, so nothing escapes it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{visible(text, keep=chr(9) + chr(10))}\n{fence}\n"


def tail_block(text: str) -> str:
    """Multi-line text as a code block, keeping its last DETAILS_LIMIT characters (where stderr ends)."""
    text = text.replace("\r\n", "\n").strip("\n")
    if len(text) > DETAILS_LIMIT:
        tail = text[-DETAILS_LIMIT:]
        text = "… (earlier lines cut)\n" + tail[tail.find("\n") + 1 :]
    return fenced(text, "text") + "\n"


def size(text: str) -> int:
    return len(text.encode("utf-8", "replace"))


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def metric(value: Any, factor: float = 1.0) -> str:
    """A metric cell: numbers to three digits in the table's unit, "nan"/"inf" as is, absent as empty."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    v = number(value)
    if v is None:
        return "" if value is None else md(clip(str(value), 60))
    return sig(v / factor)


def reason_cell(r: CheckResult) -> str:
    return md(clip(one_line(r.reason), REASON_LIMIT))


def outcome_cell(r: CheckResult) -> str:
    return f"{ICON[r.outcome]} {r.outcome.value}"


@dataclass(frozen=True)
class Row:
    line: str
    key: bool  # a failing row: kept before all others when the budget is short
    repro: str = ""  # lines for the table's "Reproduce" block
    detail: str = ""  # a <details> block explaining the failure
    lead: str = ""  # shown open right under the table, before "Reproduce" (a slower forward's ops: what to read first)


@dataclass(frozen=True)
class Table:
    """A heading, a header and rows; `footer` closes what the heading opened (a <details>).

    `tier` orders the filling of non-key rows when the budget is short: lower tiers first. `kind` is the
    `--fail-on` kind of its checks ("correctness", "latency", "memory", "warnings"), which orders the tables of
    what needs attention; "" for a table of several kinds.
    """

    heading: str
    header: str
    rows: tuple[Row, ...]
    footer: str = ""
    tier: int = 0
    kind: str = ""


# The order of the tables of what needs attention: correctness first (what the headline names first), then the
# measured kinds; a table of several kinds (the runs' matrix) comes before them all, as the overview.
KIND_ORDER = ("", "correctness", "latency", "memory", "warnings")


def by_kind(tables: Sequence[Table]) -> list[Table]:
    """The tables in KIND_ORDER, keeping their order within a kind (a stable sort)."""
    return sorted(tables, key=lambda t: KIND_ORDER.index(t.kind) if t.kind in KIND_ORDER else len(KIND_ORDER))


def collapse(tables: Sequence[Table], summary: str) -> list[Table]:
    """The tables inside one <details> block whose <summary> is `summary` (plain text, escaped here); none, none."""
    if not tables:
        return []
    block = [replace(tables[0], heading=f"<details><summary>{html_text(summary, 400)}</summary>\n\n{tables[0].heading}"),
             *tables[1:]]
    block[-1] = replace(block[-1], footer=block[-1].footer + "</details>\n\n")  # may be the first table
    return block


def tally(results: Sequence[CheckResult]) -> str:
    """"3 failed, 1 suspicious, 9 passed": the outcomes counted, most urgent first."""
    counts = Counter(r.outcome for r in results)
    return ", ".join(f"{n} {o.value}" for o, n in sorted(counts.items(), key=lambda kv: RANK[kv[0]]))


def row_line(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |\n"


def table_header(headers: Sequence[str]) -> str:
    return row_line(headers) + row_line(["---"] * len(headers))


def detail_block(r: CheckResult, run: str) -> str:
    """A collapsed block with a failing check's details: its whole reason when the table cut it, stderr's tail, the
    top mismatches."""
    details = r.details.strip()
    mismatches = r.metrics.get("top_mismatches")
    mismatches = [m for m in mismatches if isinstance(m, dict)][:10] if isinstance(mismatches, list) else []
    reason = one_line(r.reason)
    cut_short = len(reason) > REASON_LIMIT  # the table's cell shows only its start
    if not details and not mismatches and not cut_short:
        return ""
    # the <summary> line cuts the reason where the cell did, so the whole reason is shown once: there when it
    # fits the cell, else in the block's body
    head = html_text(f"{visible(r.id)} on {run}")
    shown = f"{head}: {html_text(reason, REASON_LIMIT)}" if reason else head
    text = f"<details><summary>{ICON[r.outcome]} {shown}</summary>\n\n"
    if cut_short:
        text += md(reason) + "\n\n"
    if details:
        text += tail_block(r.details)
    if mismatches:
        keys = ("index", "got", "expected", "abs_err")
        text += table_header(["index", "got", "expected", "abs err"])
        text += "".join(row_line([metric(m.get(k)) for k in keys]) for m in mismatches) + "\n"
    return text + "</details>\n\n"


def failing_row(line: str, r: CheckResult, run: str, *, failing: bool) -> Row:
    """A row that, when failing, carries the check's repro command and details block (a suspicious one its details)."""
    repro = f"# {visible(r.id)} on {run}\n{r.repro.strip()}\n" if failing and r.repro.strip() else ""
    # a suspicious row needs attention too: its whole reason when the cell cut it (what deciding would cost)
    shown = failing or r.outcome is Outcome.SUSPICIOUS
    return Row(line, failing, repro, detail_block(r, run) if shown else "")


def render_tables(tables: Sequence[Table], plan: Sequence[tuple[int, int]]) -> str:
    """Each table with its first `lines` rows and the repro and details of its first `extras` rows."""
    text = ""
    for table, (lines, extras) in zip(tables, plan):
        kept = table.rows[:lines]
        text += table.heading
        if kept:
            text += table.header + "".join(r.line for r in kept) + "\n"
        hidden = table.rows[lines:]
        if hidden:
            failing = sum(r.key for r in hidden)
            also = f" ({failing} of them failing)" if failing else ""
            text += f"… {len(hidden)} more rows{also} not shown to stay under the size limit; see report.json\n\n"
        text += "".join(r.lead for r in kept[:extras])
        repro = "".join(r.repro for r in kept[:extras])
        if repro:
            text += "**Reproduce**\n\n" + fenced(repro.rstrip("\n"), "sh") + "\n"
        text += "".join(r.detail for r in kept[:extras]) + table.footer
    return text


def fixed_size(tables: Sequence[Table]) -> int:
    """Bytes the tables take with no rows, plus room for their headers and truncation lines."""
    empty = render_tables(tables, [(0, 0)] * len(tables))
    return size(empty) + sum(size(t.header) + 64 for t in tables)


def plan(tables: Sequence[Table], room: int) -> list[tuple[int, int]]:
    """How many rows (and of those, how many with repro and details) of each table fit in `room` bytes.

    First the key (failing) rows of every table, then their repro and details, then the other rows, table by
    table in order of tier, then the other rows' details; each stage only when the one before fitted whole. Rows stay a prefix of their table
    (key rows sort first).
    """
    lines, extras = [0] * len(tables), [0] * len(tables)
    by_tier = sorted(range(len(tables)), key=lambda i: (tables[i].tier, i))

    def fill(counts: list[int], order: Sequence[int], limit: Callable[[int], int], cost: Callable[[Row], int]) -> bool:
        nonlocal room
        for i in order:
            while counts[i] < limit(i):
                need = cost(tables[i].rows[counts[i]])
                if need > room:
                    return False
                room, counts[i] = room - need, counts[i] + 1
        return True

    key = [sum(r.key for r in t.rows) for t in tables]
    everywhere = range(len(tables))
    if fill(lines, everywhere, lambda i: key[i], lambda r: size(r.line)) and fill(
        extras, everywhere, lambda i: lines[i], lambda r: size(r.lead + r.repro + r.detail)
    ):
        # then the other rows, and last the details of those that have them (a suspicious row's whole reason)
        if fill(lines, by_tier, lambda i: len(tables[i].rows), lambda r: size(r.line)):
            fill(extras, by_tier, lambda i: lines[i], lambda r: size(r.lead + r.repro + r.detail))
    return list(zip(lines, extras))


def truncation_notice(tables: Sequence[Table], plan: Sequence[tuple[int, int]]) -> str:
    rows = sum(len(t.rows) - lines for t, (lines, _) in zip(tables, plan))
    extras = sum(1 for t, (_, extras) in zip(tables, plan) for r in t.rows[extras:] if r.lead or r.repro or r.detail)
    dropped = [f"{rows} more rows"] if rows else []
    dropped += [f"the repro and details of {extras} checks"] if extras else []
    if not dropped:
        return ""
    return f"> ⚠️ … {' and '.join(dropped)} truncated to stay under GitHub's 1 MiB summary limit; see report.json\n\n"


def cut(text: str, budget: int) -> str:
    """`text` cut at a line end to fit `budget` with a sentence saying so."""
    notice = "\n\n> ⚠️ … the rest of this summary was cut to stay under GitHub's 1 MiB summary limit; see report.json\n"
    head = text.encode("utf-8", "replace")[: max(budget - size(notice), 0)].decode("utf-8", "ignore")
    return head.rsplit("\n", 1)[0] + notice
