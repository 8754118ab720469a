"""Reports -> the GitHub-flavoured Markdown job summary, kept under a byte budget."""

from __future__ import annotations

import html
import math
import re
import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from torch_upgrade_check.model import ASPECTS, CheckResult, Outcome, Report, Verdict
from torch_upgrade_check.report import (
    CORRECTNESS_ASPECTS,
    FAILING,
    clip,
    merged_verdict,
    nothing_ran,
    number,
    one_line,
    run_names,
    total_counts,
    visible,
)

BUDGET_BYTES = 900_000  # GitHub drops a step summary over 1 MiB; the margin leaves room for other steps
REASON_LIMIT = 160  # characters of a reason in a table cell
DETAILS_LIMIT = 3000  # characters of a failing check's details; the tail is kept, where stderr ends
ICON = {Outcome.FAILED: "❌", Outcome.ERROR: "💥", Outcome.NOT_RUN: "⏹️", Outcome.SKIPPED: "⏭️", Outcome.PASSED: "✅"}
_RANK = {Outcome.FAILED: 0, Outcome.ERROR: 1, Outcome.NOT_RUN: 2, Outcome.SKIPPED: 3, Outcome.PASSED: 4}
_MD_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")  # every ASCII punctuation character
_TIME_UNITS = (("ns", 1e-6), ("µs", 1e-3), ("ms", 1.0), ("s", 1e3))  # factors in milliseconds
_BYTE_UNITS = (("B", 1.0), ("KiB", 1024.0), ("MiB", 1024.0**2), ("GiB", 1024.0**3))
_SCALES = {"ms": (_TIME_UNITS, 1.0), "s": (_TIME_UNITS, 1e3), "bytes": (_BYTE_UNITS, 1.0)}  # kind -> units, to ms/B
# Per aspect: (header, metric key, kind) per measured column. The first column is the one a table sorts
# by (largest first: failing, then slowest) and a matrix cell shows.
_ERRORS = (("max abs err", "max_abs_err", ""), ("max rel err", "max_rel_err", ""), ("mismatched", "", "share"))
_COLUMNS = {
    "latency": (("median", "median_ms", "ms"), ("IQR", "iqr_ms", "ms"), ("samples", "samples_ms", "count"),
                ("threads", "threads", "")),
    "memory": (("peak", "peak_bytes", "bytes"), ("API", "memory_api", "")),
    "compile": (("compile", "compile_time_s", "s"), *_ERRORS),
    "determinism": (("max abs diff", "max_abs_diff", ""), ("bitwise equal", "bitwise_equal", ""),
                    ("differing tensors", "differing_tensors", "")),
    "fsdp2": (("max abs err", "max_abs_err", ""), ("world size", "world_size", ""), ("backend", "backend", "")),
}
_ENV_ORDER = ("torch_version", "torch_git", "cuda", "cudnn", "nccl", "triton", "device_name", "driver")
_ENV_ORDER += ("python", "os", "cpu", "threads")


def render_summary(reports: Sequence[Report], *, budget_bytes: int = BUDGET_BYTES) -> str:
    """The job summary: verdict line first, counts, then a table per aspect (failing, then slowest, first).

    Over `budget_bytes` (UTF-8), rows are dropped on purpose, in this order of keeping: failing rows,
    their repro commands and details, the other rows; the text then says how many were left out.
    """
    names = run_names(reports)
    runs = list(zip(reports, names))
    tables = ([_matrix(runs)] if len(reports) > 1 else []) + _aspect_tables(runs)
    head = f"## {_md(headline(reports))}\n\n"
    body = _counts_table(runs) + _infra_section(runs)
    tail = _environment(runs)
    empty = [(0, 0)] * len(tables)
    reserve = sum(_size(t.header) + 64 for t in tables) + 256  # headers, fences, the truncation notice
    room = budget_bytes - _size(head + body + tail + _render_tables(tables, empty)) - reserve
    plan = _plan(tables, room)
    notice = _truncation_notice(tables, plan)
    text = (head + notice + body + _render_tables(tables, plan) + tail).rstrip("\n") + "\n"
    # Last resort, when even the fixed sections overflow: the verdict and what fits of the counts table,
    # whole lines only, so no <details> or code block is left open.
    return text if _size(text) <= budget_bytes else _cut(head + body.split("\n\n", 1)[0] + "\n", budget_bytes)


def headline(reports: Sequence[Report]) -> str:
    """One line: "✅ passed: 42 checks on cpu" or "❌ failed: 3 correctness failures, 2 errors — 48 checks on cpu"."""
    if not reports:
        return "❌ failed: no reports, so nothing ran"
    verdict, counts = merged_verdict(reports), total_counts(reports)
    devices = ", ".join(dict.fromkeys(one_line(r.device) for r in reports))
    if verdict is Verdict.PASSED:
        skipped = f" ({counts['skipped']} skipped)" if counts["skipped"] else ""
        return f"✅ passed: {_plural(counts['passed'], 'check')} on {devices}{skipped}"
    runs = list(zip(reports, run_names(reports)))
    parts = []
    broken = [(r, name) for r, name in runs if r.infra_error]
    if len(broken) == 1:
        parts.append(f"the run on {broken[0][1]} could not happen ({clip(one_line(broken[0][0].infra_error), 120)})")
    elif broken:
        parts.append(f"{len(broken)} runs could not happen")
    failed = Counter(_group(c.aspect) for r in reports for c in r.results if c.outcome is Outcome.FAILED)
    parts += [_plural(n, f"{group} failure") for group, n in failed.most_common()]
    if counts["error"]:
        parts.append(_plural(counts["error"], "error"))
    if counts["not-run"]:
        parts.append(f"{counts['not-run']} not run")
    idle = [name for r, name in runs if nothing_ran(r)]
    if idle:
        skipped = f" ({counts['skipped']} skipped)" if counts["skipped"] else ""
        parts.append(f"nothing ran{skipped}" if len(reports) == 1 else f"nothing ran on {', '.join(idle)}")
    icon, word = ("💥", "error") if verdict is Verdict.ERROR else ("❌", "failed")
    return f"{icon} {word}: {', '.join(parts)} — {_plural(sum(counts.values()), 'check')} on {devices}"


def _md(text: Any) -> str:
    """Plain text for a Markdown line or table cell: one line, every ASCII punctuation backslash-escaped,
    so pipes, backticks, `<script>`, `&lt;` and emphasis all show literally."""
    return _MD_PUNCTUATION.sub(r"\\\1", one_line(str(text)))


def _html(text: Any, limit: int = 200) -> str:
    """Text for inside an HTML block line (a <summary>), where Markdown escapes do not apply."""
    return html.escape(clip(one_line(str(text)), limit))


def _fenced(text: str, info: str = "") -> str:
    """A code block whose fence is longer than any run of backticks inside, so nothing escapes it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{visible(text, keep=chr(9) + chr(10))}\n{fence}\n"


def _tail_block(text: str) -> str:
    """Multi-line text as a code block, keeping its last DETAILS_LIMIT characters (where stderr ends)."""
    text = text.replace("\r\n", "\n").strip("\n")
    if len(text) > DETAILS_LIMIT:
        tail = text[-DETAILS_LIMIT:]
        text = "… (earlier lines cut)\n" + tail[tail.find("\n") + 1 :]
    return _fenced(text, "text") + "\n"


def _size(text: str) -> int:
    return len(text.encode("utf-8", "replace"))


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _group(aspect: str) -> str:
    return "correctness" if aspect in CORRECTNESS_ASPECTS else one_line(aspect)


def _sig(value: float) -> str:
    """Three significant digits, thousands separated, exponent only for the very small."""
    if not math.isfinite(value):
        return str(value)
    if value == 0:
        return "0"
    if abs(value) >= 999.5:
        return f"{value:,.0f}"
    return f"{value:.3g}" if abs(value) >= 0.01 else f"{value:.2e}"


def _unit(values: Sequence[float | None], units: tuple[tuple[str, float], ...]) -> tuple[str, float]:
    """The unit that reads best for the middle of these values (so one table shares one unit)."""
    finite = [v for v in values if v is not None and math.isfinite(v) and v > 0]
    middle = statistics.median(finite) if finite else 0.0
    return next(((name, f) for name, f in reversed(units) if middle >= f), units[0])


def _metric(value: Any, factor: float = 1.0) -> str:
    """A metric cell: numbers to three digits in the table's unit, "nan"/"inf" as is, absent as empty."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    v = number(value)
    if v is None:
        return "" if value is None else _md(clip(str(value), 60))
    return _sig(v / factor)


def _scaled(value: Any, scale: float) -> float | None:
    v = number(value)
    return None if v is None else v * scale


@dataclass(frozen=True)
class _Row:
    line: str
    key: bool  # a failing row: kept before all others when the budget is short
    repro: str = ""  # lines for the table's "Reproduce" block
    detail: str = ""  # a <details> block explaining the failure


@dataclass(frozen=True)
class _Table:
    heading: str
    header: str
    rows: tuple[_Row, ...]


_Column = tuple[str, Callable[[CheckResult], str]]


def _row_line(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |\n"


def _table_header(headers: Sequence[str]) -> str:
    return _row_line(headers) + _row_line(["---"] * len(headers))


def _columns(aspect: str, results: Sequence[CheckResult]) -> list[_Column]:
    """The measured columns of one aspect's table; each kind of unit is chosen once per table."""
    units: dict[str, tuple[str, float]] = {}
    columns = []
    for header, key, kind in _COLUMNS.get(aspect, _ERRORS):
        if kind in _SCALES and kind not in units:
            scales, to_base = _SCALES[kind]
            name, factor = _unit([_scaled(r.metrics.get(key), to_base) for r in results], scales)
            units[kind] = (name, factor / to_base)
        columns.append((f"{header} ({units[kind][0]})" if kind in units else header, _cell(key, kind, units)))
    return columns


def _cell(key: str, kind: str, units: dict[str, tuple[str, float]]) -> Callable[[CheckResult], str]:
    if kind == "share":
        return _mismatched
    if kind == "count":
        return lambda r: str(len(r.metrics[key])) if isinstance(r.metrics.get(key), list) else ""
    factor = units[kind][1] if kind in units else 1.0
    return lambda r: _metric(r.metrics.get(key), factor)


def _mismatched(r: CheckResult) -> str:
    share, count, numel = (number(r.metrics.get(k)) for k in ("mismatched_share", "mismatched_count", "numel"))
    text = "" if share is None else f"{_sig(share * 100)}%"
    if count is not None and numel is not None and math.isfinite(count) and math.isfinite(numel):
        text += f" ({int(count):,} of {int(numel):,})"
    return text.strip()


def _primary(r: CheckResult) -> tuple[float | None, str]:
    """The value of the first column of the check's table, in its base unit (ms, B), and that kind."""
    _, key, kind = _COLUMNS.get(r.aspect, _ERRORS)[0]
    return _scaled(r.metrics.get(key), _SCALES[kind][1] if kind in _SCALES else 1.0), kind


def _limits(r: CheckResult) -> str:
    return ", ".join(f"{_md(k)}={_metric(v)}" for k, v in r.thresholds.items())


def _sort_key(r: CheckResult, index: int) -> tuple[int, float, str, int]:
    v = _primary(r)[0]
    worst = -math.inf if v is None else (math.inf if math.isnan(v) else v)
    return (_RANK[r.outcome], -worst, r.id, index)


def _aspect_tables(runs: Sequence[tuple[Report, str]]) -> list[_Table]:
    by_aspect: dict[str, list[tuple[CheckResult, str, int]]] = {}
    for i, (report, name) in enumerate(runs):
        for r in report.results:
            by_aspect.setdefault(r.aspect, []).append((r, name, i))
    order = [a for a in ASPECTS if a in by_aspect] + sorted(set(by_aspect) - set(ASPECTS))
    multi = len(runs) > 1
    tables = []
    for aspect in order:
        entries = sorted(by_aspect[aspect], key=lambda e: _sort_key(e[0], e[2]))
        results = [r for r, _, _ in entries]
        columns = _columns(aspect, results)
        headers = ["check", *(["run"] if multi else []), "outcome", *(h for h, _ in columns), "limits", "reason"]
        rows = []
        for r, name, _ in entries:
            reason = _md(clip(one_line(r.reason), REASON_LIMIT))
            cells = [_md(visible(r.id)), *([_md(name)] if multi else []), f"{ICON[r.outcome]} {r.outcome.value}",
                     *(f(r) for _, f in columns), _limits(r), reason]
            failing = r.outcome in FAILING
            repro = f"# {visible(r.id)} on {name}\n{r.repro.strip()}\n" if failing and r.repro.strip() else ""
            rows.append(_Row(_row_line(cells), failing, repro, _detail(r, name) if failing else ""))
        tally = Counter(r.outcome for r in results)
        counts = ", ".join(f"{n} {o.value}" for o, n in sorted(tally.items(), key=lambda kv: _RANK[kv[0]]))
        tables.append(_Table(f"### {_md(aspect)} ({counts})\n\n", _table_header(headers), tuple(rows)))
    return tables


def _detail(r: CheckResult, run: str) -> str:
    """A collapsed block with a failing check's details (stderr tail, top mismatches)."""
    details = r.details.strip()
    mismatches = r.metrics.get("top_mismatches")
    mismatches = [m for m in mismatches if isinstance(m, dict)][:10] if isinstance(mismatches, list) else []
    if not details and not mismatches:
        return ""
    text = f"<details><summary>{ICON[r.outcome]} {_html(f'{visible(r.id)} on {run}: {r.reason}')}</summary>\n\n"
    if details:
        text += _tail_block(r.details)
    if mismatches:
        keys = ("index", "got", "expected", "abs_err")
        text += _table_header(["index", "got", "expected", "abs err"])
        text += "".join(_row_line([_metric(m.get(k)) for k in keys]) for m in mismatches) + "\n"
    return text + "</details>\n\n"


def _matrix(runs: Sequence[tuple[Report, str]]) -> _Table:
    """Checks × runs, a cell per run; a check that one run lacks shows "—" there (not run there)."""
    cells: dict[str, dict[int, CheckResult]] = {}
    for i, (report, _) in enumerate(runs):
        for r in report.results:
            cells.setdefault(r.id, {})[i] = r
    rows = []
    for check_id, seen in cells.items():
        failing = any(r.outcome in FAILING for r in seen.values())
        line = _row_line([_md(visible(check_id)), *(_matrix_cell(seen.get(i)) for i in range(len(runs)))])
        rows.append((not failing, min(_RANK[r.outcome] for r in seen.values()), check_id, _Row(line, failing)))
    rows.sort(key=lambda e: e[:3])
    header = _table_header(["check", *(_md(name) for _, name in runs)])
    return _Table(f"### Matrix ({len(cells)} checks × {len(runs)} runs)\n\n", header, tuple(e[3] for e in rows))


def _matrix_cell(r: CheckResult | None) -> str:
    if r is None:
        return "—"
    v, kind = _primary(r)
    if v is None:
        return ICON[r.outcome]
    if kind not in _SCALES:
        return f"{ICON[r.outcome]} {_sig(v)}"
    name, factor = _unit([v], _SCALES[kind][0])
    return f"{ICON[r.outcome]} {_sig(v / factor)} {name}"


def _counts_table(runs: Sequence[tuple[Report, str]]) -> str:
    outcomes = (Outcome.PASSED, Outcome.FAILED, Outcome.ERROR, Outcome.SKIPPED, Outcome.NOT_RUN)
    text = _table_header(["run", "verdict", *(o.value for o in outcomes), "total"])
    for report, name in runs:
        counts = report.counts()
        text += _row_line([_md(name), report.verdict().value, *(str(counts[o.value]) for o in outcomes),
                           str(sum(counts.values()))])
    return text + "\n"


def _infra_section(runs: Sequence[tuple[Report, str]]) -> str:
    broken = [(r, name) for r, name in runs if r.infra_error]
    if not broken:
        return ""
    text = "### 💥 Runs that could not happen\n\n"
    for report, name in broken:
        error = report.infra_error.strip()
        text += f"**{_md(name)}**: {_md(clip(one_line(error), 300))}\n\n"
        if "\n" in error:
            text += _tail_block(error)
    return text


def _render_tables(tables: Sequence[_Table], plan: Sequence[tuple[int, int]]) -> str:
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
        repro = "".join(r.repro for r in kept[:extras])
        if repro:
            text += "**Reproduce**\n\n" + _fenced(repro.rstrip("\n"), "sh") + "\n"
        text += "".join(r.detail for r in kept[:extras])
    return text


def _plan(tables: Sequence[_Table], room: int) -> list[tuple[int, int]]:
    """How many rows (and of those, how many with repro and details) of each table fit in `room` bytes.

    First the failing rows of every table, then their repro and details, then the other rows; each stage
    only when the one before fitted whole. Rows stay a prefix of their table (failing rows sort first).
    """
    lines, extras = [0] * len(tables), [0] * len(tables)

    def fill(counts: list[int], limit: Callable[[int], int], cost: Callable[[_Row], int]) -> bool:
        nonlocal room
        for i, table in enumerate(tables):
            while counts[i] < limit(i):
                size = cost(table.rows[counts[i]])
                if size > room:
                    return False
                room, counts[i] = room - size, counts[i] + 1
        return True

    failing = [sum(r.key for r in t.rows) for t in tables]
    if fill(lines, lambda i: failing[i], lambda r: _size(r.line)) and fill(
        extras, lambda i: lines[i], lambda r: _size(r.repro + r.detail)
    ):
        fill(lines, lambda i: len(tables[i].rows), lambda r: _size(r.line))
    return list(zip(lines, extras))


def _truncation_notice(tables: Sequence[_Table], plan: Sequence[tuple[int, int]]) -> str:
    rows = sum(len(t.rows) - lines for t, (lines, _) in zip(tables, plan))
    extras = sum(1 for t, (_, extras) in zip(tables, plan) for r in t.rows[extras:] if r.repro or r.detail)
    dropped = [f"{rows} more rows"] if rows else []
    dropped += [f"the repro and details of {extras} failing checks"] if extras else []
    if not dropped:
        return ""
    return f"> ⚠️ … {' and '.join(dropped)} truncated to stay under GitHub's 1 MiB summary limit; see report.json\n\n"


def _cut(text: str, budget: int) -> str:
    """`text` cut at a line end to fit `budget` with a sentence saying so."""
    notice = "\n\n> ⚠️ … the rest of this summary was cut to stay under GitHub's 1 MiB summary limit; see report.json\n"
    head = text.encode("utf-8", "replace")[: max(budget - _size(notice), 0)].decode("utf-8", "ignore")
    return head.rsplit("\n", 1)[0] + notice


def _environment(runs: Sequence[tuple[Report, str]]) -> str:
    if not runs:
        return ""
    env_keys = [k for k in _ENV_ORDER if any(k in r.environment for r, _ in runs)]
    env_keys += list(dict.fromkeys(k for r, _ in runs for k in r.environment if k not in _ENV_ORDER))
    fields: list[tuple[str, Callable[[Report], Any]]] = [
        ("tool version", lambda r: r.tool_version),
        ("device (requested)", lambda r: f"{r.device} ({r.requested_device})"),
        *((k, lambda r, k=k: r.environment.get(k)) for k in env_keys),
        ("started", lambda r: r.started),
        ("finished", lambda r: r.finished or "(not finished)"),
        ("command", lambda r: " ".join(r.command)),
    ]
    text = "<details><summary>Environment</summary>\n\n" + _table_header(["", *(_md(n) for _, n in runs)])
    for label, get in fields:
        values = [get(r) for r, _ in runs]
        text += _row_line([_md(label), *("—" if v in (None, "") else _md(clip(str(v), 200)) for v in values)])
    return text + "\n</details>\n\n"
