"""Check results -> the per-aspect tables and the check × run matrix of the job summary (pure).

Every table comes in one of three parts: `attention` (the deciding runs' checks that failed, errored, did not run
or are suspicious: shown open, with repro commands and details), `rest` (their other checks: collapsed) and
`informs` (a comparison's baseline: collapsed on its own, never failing rows, no repro).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from torch_upgrade_check.aspects import ASPECTS, FAIL_KINDS, part
from torch_upgrade_check.model import CheckResult, Report
from torch_upgrade_check.report import (
    ATTENTION,
    BYTE_UNITS,
    FAILING,
    TIME_UNITS,
    best_unit,
    number,
    sig,
    visible,
    worst_tensor,
)
from torch_upgrade_check.report.columns import CORRECTNESS as _CORRECTNESS
from torch_upgrade_check.report.columns import DEFAULT_PRIMARY as _DEFAULT_PRIMARY
from torch_upgrade_check.report.columns import Column
from torch_upgrade_check.report.comparison import is_shown_here
from torch_upgrade_check.report.markdown import (
    ICON,
    RANK,
    Row,
    Table,
    failing_row,
    md,
    metric,
    outcome_cell,
    reason_cell,
    row_line,
    table_header,
    tally,
)

_TIERS = {"attention": 0, "rest": 1, "informs": 3}  # rows kept in this order when the budget is short
_SCALES = {"ms": (TIME_UNITS, 1.0), "s": (TIME_UNITS, 1e3), "bytes": (BYTE_UNITS, 1.0)}  # kind -> units, to ms/B


def columns_of(aspect: str) -> tuple[Column, ...]:
    """An aspect's measured columns: its render.COLUMNS (an aspect this tool does not know, from another version's
    report, gets the correctness columns)."""
    render = part(aspect, "render")
    return tuple(render.COLUMNS) if render is not None else _CORRECTNESS


def primary_of(aspect: str) -> Column:
    """The column an aspect's table sorts by (largest first, after the outcome) and a matrix cell shows."""
    render = part(aspect, "render")
    return render.PRIMARY if render is not None else _DEFAULT_PRIMARY


def in_part(r: CheckResult, part: str) -> bool:
    """Whether a deciding run's check belongs to `part` ("attention" or "rest"); a baseline's are all "informs"."""
    return part == "informs" or (r.outcome in ATTENTION) == (part == "attention")


def aspect_tables(runs: Sequence[tuple[Report, str]], part: str) -> list[Table]:
    """A table per aspect of the checks of these runs in `part` (failing, then largest first)."""
    by_aspect: dict[str, list[tuple[CheckResult, str, int]]] = {}
    for i, (report, name) in enumerate(runs):
        for r in report.results:
            if not is_shown_here(report, r) and in_part(r, part):
                by_aspect.setdefault(r.aspect, []).append((r, name, i))
    order = [a for a in ASPECTS if a in by_aspect] + sorted(set(by_aspect) - set(ASPECTS))
    multi = len(runs) > 1
    tables = []
    for aspect in order:
        entries = sorted(by_aspect[aspect], key=lambda e: _sort_key(e[0], e[2]))
        results = [r for r, _, _ in entries]
        # The measured columns and limits, less those empty in every row (checks that crashed or were skipped)
        columns = [*_columns(aspect, results, attention=part == "attention"), ("limits", _limits)]
        values = [[f(r) for _, f in columns] for r in results]
        keep = [i for i in range(len(columns)) if any(row[i] for row in values)]
        headers = ["check", *(["run"] if multi else []), "outcome", *(columns[i][0] for i in keep), "reason"]
        rows = []
        for (r, name, _), measured in zip(entries, values):
            cells = [md(visible(r.id)), *([md(name)] if multi else []), outcome_cell(r),
                     *(measured[i] for i in keep), reason_cell(r)]
            rows.append(failing_row(row_line(cells), r, name, failing=r.outcome in FAILING and part != "informs"))
        heading = f"#### {md(aspect)} ({tally(results)})\n\n"
        tables.append(Table(heading, table_header(headers), tuple(rows), tier=_TIERS[part],
                            kind=FAIL_KINDS.get(aspect, "correctness")))
    return tables


def matrix(runs: Sequence[tuple[Report, str]], part: str) -> list[Table]:
    """Checks × runs, a cell per run, of the checks in `part`: "attention" holds every check that needs it on any
    run (with how the other runs fared), "rest" the others. A check that one run lacks shows "—" there."""
    cells: dict[str, dict[int, CheckResult]] = {}
    for i, (report, _) in enumerate(runs):
        for r in report.results:
            cells.setdefault(r.id, {})[i] = r
    total = len(cells)
    cells = {c: seen for c, seen in cells.items() if any(r.outcome in ATTENTION for r in seen.values()) == (part == "attention")}
    if not cells:
        return []
    rows = []
    for check_id, seen in cells.items():
        failing = any(r.outcome in FAILING for r in seen.values())
        line = row_line([md(visible(check_id)), *(_matrix_cell(seen.get(i)) for i in range(len(runs)))])
        rows.append((not failing, min(RANK[r.outcome] for r in seen.values()), check_id, Row(line, failing)))
    rows.sort(key=lambda e: e[:3])
    header = table_header(["check", *(md(name) for _, name in runs)])
    which = f"{len(cells)} of the {total} checks" if len(cells) < total else f"{total} checks"
    heading = f"#### Matrix ({which} × {len(runs)} runs)\n\n"
    return [Table(heading, header, tuple(e[3] for e in rows), tier=_TIERS[part])]


def _scaled(value: Any, scale: float) -> float | None:
    v = number(value)
    return None if v is None else v * scale


_Cell = Callable[[CheckResult], str]


def _columns(aspect: str, results: Sequence[CheckResult], *, attention: bool) -> list[tuple[str, _Cell]]:
    """The measured columns of one aspect's table; each kind of unit is chosen once per table."""
    units: dict[str, tuple[str, float]] = {}
    columns = []
    for col in columns_of(aspect):
        if col.attention_only and not attention:
            continue
        if col.kind in _SCALES and col.kind not in units:
            scales, to_base = _SCALES[col.kind]
            name, factor = best_unit([_scaled(r.metrics.get(col.key), to_base) for r in results], scales)
            units[col.kind] = (name, factor / to_base)
        header = f"{col.header} ({units[col.kind][0]})" if col.kind in units else col.header
        columns.append((header, _cell(col, units)))
    return columns


def _cell(col: Column, units: dict[str, tuple[str, float]]) -> _Cell:
    special = {"share": _mismatched, "tensors": _tensors, "worst": _worst, "count": lambda m: _count(m.get(col.key))}
    if col.kind in special:
        return lambda r: special[col.kind](r.metrics)
    factor = units[col.kind][1] if col.kind in units else 1.0
    return lambda r: metric(r.metrics.get(col.key), factor)


def _count(samples: Any) -> str:
    return str(len(samples)) if isinstance(samples, list) else ""


def _tensors(m: Mapping[str, Any]) -> str:
    """How many tensors were compared: the worker's count, else the per-tensor list's length."""
    n = number(m.get("tensors"))
    if n is not None and math.isfinite(n):
        return f"{int(n):,}"
    return str(len(m["per_tensor"])) if isinstance(m.get("per_tensor"), list) else ""


def _worst(m: Mapping[str, Any]) -> str:
    t = worst_tensor(m)
    if t is None:
        return ""
    nan = number(t.get("nan"))
    return md(str(t.get("name", "?"))) + (f" ({int(nan):,} NaN)" if nan and math.isfinite(nan) else "")


def _mismatched(m: Mapping[str, Any]) -> str:
    """"0.42% (4,200 of 1,000,000)", or "0 of 1,000,000" when none mismatched."""
    share, count, numel = (number(m.get(k)) for k in ("mismatched_share", "mismatched_count", "numel"))
    of = ""
    if count is not None and numel is not None and math.isfinite(count) and math.isfinite(numel):
        if count == 0:
            return f"0 of {int(numel):,}"
        of = f"{int(count):,} of {int(numel):,}"
    # a few elements in millions: "<0.01%" reads, "1.53e-04%" does not
    text = "" if share is None else "<0.01%" if 0 < share * 100 < 0.01 else f"{sig(share * 100)}%"
    return f"{text} ({of})" if text and of else text or of


def _primary(r: CheckResult) -> tuple[float | None, str]:
    """The check's primary value in its base unit (ms, B), and its kind."""
    col = primary_of(r.aspect)
    return _scaled(r.metrics.get(col.key), _SCALES[col.kind][1] if col.kind in _SCALES else 1.0), col.kind


def _limits(r: CheckResult) -> str:
    return ", ".join(f"{md(k)}={metric(v)}" for k, v in r.thresholds.items())


def _sort_key(r: CheckResult, index: int) -> tuple[int, float, str, int]:
    v = _primary(r)[0]
    worst = -math.inf if v is None else (math.inf if math.isnan(v) else v)
    return (RANK[r.outcome], -worst, r.id, index)


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
