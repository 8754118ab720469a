"""Reports -> the GitHub-flavoured Markdown job summary, kept under a byte budget."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from torch_upgrade_check.model import ASPECTS, CheckResult, Outcome, Report, Verdict
from torch_upgrade_check.report import (
    AB_ASPECTS,
    BYTE_UNITS,
    CORRECTNESS_ASPECTS,
    FAILING,
    TIME_UNITS,
    best_unit,
    clip,
    deciding,
    merged_verdict,
    nothing_ran,
    number,
    one_line,
    run_names,
    sig,
    total_counts,
    visible,
)
from torch_upgrade_check.report.comparison import comparison_tables, is_shown_here, pairs
from torch_upgrade_check.report.markdown import (
    ICON,
    RANK,
    Row,
    Table,
    cut,
    failing_row,
    fixed_size,
    html_text,
    md,
    metric,
    outcome_cell,
    plan,
    plural,
    reason_cell,
    render_tables,
    row_line,
    size,
    table_header,
    tail_block,
    truncation_notice,
)

BUDGET_BYTES = 900_000  # GitHub drops a step summary over 1 MiB; the margin leaves room for other steps
_SCALES = {"ms": (TIME_UNITS, 1.0), "s": (TIME_UNITS, 1e3), "bytes": (BYTE_UNITS, 1.0)}  # kind -> units, to ms/B
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
_ENV_ORDER = ("torch_version", "torch_git", "cuda", "cudnn", "nccl", "triton", "cuda_devices", "driver")
_ENV_ORDER += ("python", "os", "cpu", "threads")
_ENV_HIDDEN = ("packages",)  # every installed package is in report.json; a comparison shows those that changed
_BASELINE_TIER = 3  # a baseline's rows are the first to go when the budget is short: they inform only


def render_summary(reports: Sequence[Report], *, budget_bytes: int = BUDGET_BYTES) -> str:
    """The job summary: verdict line first, counts, then what changed (comparisons), a table per aspect
    (failing, then slowest, first) of the deciding runs, the baselines' tables collapsed, the environment.

    Over `budget_bytes` (UTF-8), rows are dropped on purpose, in this order of keeping: failing rows,
    their repro commands and details, the other rows (comparisons first, unchanged and baseline rows last);
    the text then says how many were left out.
    """
    runs = list(zip(reports, run_names(reports)))
    decide = {id(r) for r in deciding(reports)}
    main = [(r, name) for r, name in runs if id(r) in decide]
    informing = [(r, name) for r, name in runs if id(r) not in decide]
    tables = [t for c, b in pairs(reports) for t in comparison_tables(runs[c], runs[b] if b is not None else None)]
    tables += ([_matrix(main)] if len(main) > 1 else []) + _aspect_tables(main)
    tables += _baseline_tables(informing)
    head = f"## {md(headline(reports))}\n\n"
    body = _counts_table(runs, decide) + _infra_section(runs)
    tail = _environment(runs)
    room = budget_bytes - size(head + body + tail) - fixed_size(tables) - 256  # 256: the truncation notice
    kept = plan(tables, room)
    notice = truncation_notice(tables, kept)
    text = (head + notice + body + render_tables(tables, kept) + tail).rstrip("\n") + "\n"
    # Last resort, when even the fixed sections overflow: the verdict and what fits of the counts table,
    # whole lines only, so no <details> or code block is left open.
    return text if size(text) <= budget_bytes else cut(head + body.split("\n\n", 1)[0] + "\n", budget_bytes)


def headline(reports: Sequence[Report]) -> str:
    """One line: "✅ passed: 42 checks on cpu" or "❌ failed: 3 correctness failures, 2 errors — 48 checks on cpu";
    in a comparison "❌ failed: 1 latency regression, 1 suspicious — 12 checks on cpu, torch 2.12.0 → 2.13.0".
    Only the deciding reports count (a comparison's baseline informs); a run that could not happen always does."""
    if not reports:
        return "❌ failed: no reports, so nothing ran"
    decide = deciding(reports)
    verdict, counts = merged_verdict(reports), total_counts(reports)
    devices = ", ".join(dict.fromkeys(one_line(r.device) for r in decide))
    versions = [f"torch {one_line(reports[b].label)} → {one_line(reports[c].label)}"
                for c, b in pairs(reports) if b is not None]
    scope = f"{plural(sum(counts.values()), 'check')} on {devices}" + "".join(f", {v}" for v in dict.fromkeys(versions))
    notes = [f"{counts[k]} {k}" for k in ("suspicious", "skipped") if counts[k]]
    if verdict is Verdict.PASSED:
        return f"✅ passed: {scope}" + (f" ({', '.join(notes)})" if notes else "")
    runs = list(zip(reports, run_names(reports)))
    parts = []
    broken = [(r, name) for r, name in runs if r.infra_error]
    if len(broken) == 1:
        parts.append(f"the run on {broken[0][1]} could not happen ({clip(one_line(broken[0][0].infra_error), 120)})")
    elif broken:
        parts.append(f"{len(broken)} runs could not happen")
    failed = Counter(_failure_kind(c) for r in decide for c in r.results if c.outcome is Outcome.FAILED)
    groups = ["correctness", *(a for a in ASPECTS if a not in CORRECTNESS_ASPECTS)]
    for (group, word), n in sorted(failed.items(), key=lambda kv: (_index(groups, kv[0][0]), kv[0])):
        parts.append(plural(n, f"{group} {word}"))
    if counts["error"]:
        parts.append(plural(counts["error"], "error"))
    if counts["not-run"]:
        parts.append(f"{counts['not-run']} not run")
    if counts["suspicious"]:
        parts.append(f"{counts['suspicious']} suspicious")
    idle = [name for r, name in runs if any(r is d for d in decide) and nothing_ran(r)]
    if idle:
        skipped = f" ({counts['skipped']} skipped)" if counts["skipped"] else ""
        parts.append(f"nothing ran{skipped}" if len(decide) == 1 else f"nothing ran on {', '.join(idle)}")
    icon, word = ("💥", "error") if verdict is Verdict.ERROR else ("❌", "failed")
    return f"{icon} {word}: {', '.join(parts)} — {scope}"


def _failure_kind(r: CheckResult) -> tuple[str, str]:
    """("latency", "regression") for a failed A/B comparison, ("correctness", "failure") and so on otherwise."""
    group = "correctness" if r.aspect in CORRECTNESS_ASPECTS else one_line(r.aspect)
    return group, "regression" if r.aspect in AB_ASPECTS and r.metrics.get("change") == "regression" else "failure"


def _index(order: Sequence[str], item: str) -> int:
    return order.index(item) if item in order else len(order)


def _scaled(value: Any, scale: float) -> float | None:
    v = number(value)
    return None if v is None else v * scale


_Column = tuple[str, Callable[[CheckResult], str]]


def _columns(aspect: str, results: Sequence[CheckResult]) -> list[_Column]:
    """The measured columns of one aspect's table; each kind of unit is chosen once per table."""
    units: dict[str, tuple[str, float]] = {}
    columns = []
    for header, key, kind in _COLUMNS.get(aspect, _ERRORS):
        if kind in _SCALES and kind not in units:
            scales, to_base = _SCALES[kind]
            name, factor = best_unit([_scaled(r.metrics.get(key), to_base) for r in results], scales)
            units[kind] = (name, factor / to_base)
        columns.append((f"{header} ({units[kind][0]})" if kind in units else header, _cell(key, kind, units)))
    return columns


def _cell(key: str, kind: str, units: dict[str, tuple[str, float]]) -> Callable[[CheckResult], str]:
    if kind == "share":
        return _mismatched
    if kind == "count":
        return lambda r: str(len(r.metrics[key])) if isinstance(r.metrics.get(key), list) else ""
    factor = units[kind][1] if kind in units else 1.0
    return lambda r: metric(r.metrics.get(key), factor)


def _mismatched(r: CheckResult) -> str:
    share, count, numel = (number(r.metrics.get(k)) for k in ("mismatched_share", "mismatched_count", "numel"))
    text = "" if share is None else f"{sig(share * 100)}%"
    if count is not None and numel is not None and math.isfinite(count) and math.isfinite(numel):
        text += f" ({int(count):,} of {int(numel):,})"
    return text.strip()


def _primary(r: CheckResult) -> tuple[float | None, str]:
    """The value of the first column of the check's table, in its base unit (ms, B), and that kind."""
    _, key, kind = _COLUMNS.get(r.aspect, _ERRORS)[0]
    return _scaled(r.metrics.get(key), _SCALES[kind][1] if kind in _SCALES else 1.0), kind


def _limits(r: CheckResult) -> str:
    return ", ".join(f"{md(k)}={metric(v)}" for k, v in r.thresholds.items())


def _sort_key(r: CheckResult, index: int) -> tuple[int, float, str, int]:
    v = _primary(r)[0]
    worst = -math.inf if v is None else (math.inf if math.isnan(v) else v)
    return (RANK[r.outcome], -worst, r.id, index)


def _aspect_tables(runs: Sequence[tuple[Report, str]], *, informs: bool = False) -> list[Table]:
    """A table per aspect. Rows of runs that only inform (baselines) are never key rows and carry no repro."""
    by_aspect: dict[str, list[tuple[CheckResult, str, int]]] = {}
    for i, (report, name) in enumerate(runs):
        for r in report.results:
            if not is_shown_here(report, r):
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
            cells = [md(visible(r.id)), *([md(name)] if multi else []), outcome_cell(r),
                     *(f(r) for _, f in columns), _limits(r), reason_cell(r)]
            rows.append(failing_row(row_line(cells), r, name, failing=r.outcome in FAILING and not informs))
        tally = Counter(r.outcome for r in results)
        counts = ", ".join(f"{n} {o.value}" for o, n in sorted(tally.items(), key=lambda kv: RANK[kv[0]]))
        heading = f"{'####' if informs else '###'} {md(aspect)} ({counts})\n\n"
        tables.append(Table(heading, table_header(headers), tuple(rows), tier=_BASELINE_TIER if informs else 1))
    return tables


def _baseline_tables(runs: Sequence[tuple[Report, str]]) -> list[Table]:
    """The baselines' own tables, collapsed: they explain a comparison and never decide the verdict."""
    tables = _aspect_tables(runs, informs=True)
    if not tables:
        return []
    what = "; ".join(f"{name}: {plural(len(r.results), 'check')}" for r, name in runs)
    summary = f"<details><summary>Baseline checks ({html_text(what, 400)}); they inform and do not decide</summary>\n\n"
    tables[0] = replace(tables[0], heading=summary + tables[0].heading)
    tables[-1] = replace(tables[-1], footer=tables[-1].footer + "</details>\n\n")  # may be the same table
    return tables


def _matrix(runs: Sequence[tuple[Report, str]]) -> Table:
    """Checks × runs, a cell per run; a check that one run lacks shows "—" there (not run there)."""
    cells: dict[str, dict[int, CheckResult]] = {}
    for i, (report, _) in enumerate(runs):
        for r in report.results:
            cells.setdefault(r.id, {})[i] = r
    rows = []
    for check_id, seen in cells.items():
        failing = any(r.outcome in FAILING for r in seen.values())
        line = row_line([md(visible(check_id)), *(_matrix_cell(seen.get(i)) for i in range(len(runs)))])
        rows.append((not failing, min(RANK[r.outcome] for r in seen.values()), check_id, Row(line, failing)))
    rows.sort(key=lambda e: e[:3])
    header = table_header(["check", *(md(name) for _, name in runs)])
    return Table(f"### Matrix ({len(cells)} checks × {len(runs)} runs)\n\n", header, tuple(e[3] for e in rows))


def _matrix_cell(r: CheckResult | None) -> str:
    if r is None:
        return "—"
    v, kind = _primary(r)
    if v is None:
        return ICON[r.outcome]
    if kind not in _SCALES:
        return f"{ICON[r.outcome]} {sig(v)}"
    name, factor = best_unit([v], _SCALES[kind][0])
    return f"{ICON[r.outcome]} {sig(v / factor)} {name}"


def _counts_table(runs: Sequence[tuple[Report, str]], decide: set[int]) -> str:
    outcomes = (Outcome.PASSED, Outcome.SUSPICIOUS, Outcome.FAILED, Outcome.ERROR, Outcome.SKIPPED, Outcome.NOT_RUN)
    text = table_header(["run", "verdict", *(o.value for o in outcomes), "total"])
    for report, name in runs:
        counts = report.counts()
        verdict = report.verdict().value + ("" if id(report) in decide else " (informs only)")
        text += row_line([md(name), verdict, *(str(counts[o.value]) for o in outcomes), str(sum(counts.values()))])
    return text + "\n"


def _infra_section(runs: Sequence[tuple[Report, str]]) -> str:
    broken = [(r, name) for r, name in runs if r.infra_error]
    if not broken:
        return ""
    text = "### 💥 Runs that could not happen\n\n"
    for report, name in broken:
        error = report.infra_error.strip()
        text += f"**{md(name)}**: {md(clip(one_line(error), 300))}\n\n"
        if "\n" in error:
            text += tail_block(error)
    return text


def _environment(runs: Sequence[tuple[Report, str]]) -> str:
    if not runs:
        return ""
    env_keys = [k for k in _ENV_ORDER if any(k in r.environment for r, _ in runs)]
    env_keys += list(dict.fromkeys(k for r, _ in runs for k in r.environment if k not in (*_ENV_ORDER, *_ENV_HIDDEN)))
    fields: list[tuple[str, Callable[[Report], Any]]] = [
        ("tool version", lambda r: r.tool_version),
        ("device (requested)", lambda r: f"{r.device} ({r.requested_device})"),
        *((k, lambda r, k=k: r.environment.get(k)) for k in env_keys),
        ("started", lambda r: r.started),
        ("finished", lambda r: r.finished or "(not finished)"),
        ("command", lambda r: " ".join(r.command)),
    ]
    text = "<details><summary>Environment</summary>\n\n" + table_header(["", *(md(n) for _, n in runs)])
    for label, get in fields:
        values = [get(r) for r, _ in runs]
        text += row_line([md(label), *("—" if v in (None, "") else md(clip(str(v), 200)) for v in values)])
    return text + "\n</details>\n\n"
