"""The cross-version aspect in the job summary (pure): the correctness columns, and its own table in the comparison,
the candidate's outputs beside the baseline's (`comparison_tables`: report/comparison.py shows it after the A/B
tables, and not again among the per-aspect tables)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from torch_upgrade_check.aspects.cross_version.judge import Metrics
from torch_upgrade_check.model import CheckResult
from torch_upgrade_check.report import ATTENTION, FAILING, number, visible
from torch_upgrade_check.report.columns import CORRECTNESS, DEFAULT_PRIMARY
from torch_upgrade_check.report.markdown import (
    RANK,
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

COLUMNS = CORRECTNESS
PRIMARY = DEFAULT_PRIMARY


def comparison_tables(results: Sequence[CheckResult], run: str, where: str) -> tuple[list[Table], list[Table]]:
    """The candidate's cross-version checks (`results`, of the run named `run`), each beside the baseline's outputs: the
    tables of those that need attention (their heading ends with `where`), and of the rest."""
    results = sorted(results, key=_cross_order)
    if not results:
        return [], []
    headers = ["check", "outcome", "max abs diff vs baseline", "mismatched vs baseline", "bitwise equal",
               "RMSE vs fp64 (candidate / baseline)", "first divergent module", "reason"]
    about = ("The candidate's outputs against the baseline's on the same inputs and weights; its error against the "
             "fp64 golden is judged relative to the baseline's.\n\n")
    parts: tuple[list[Table], list[Table]] = ([], [])
    shown = [r for r in results if r.outcome in ATTENTION]
    for part, rows in ((0, shown), (1, [r for r in results if r.outcome not in ATTENTION])):
        if not rows:
            continue
        lines = []
        for r in rows:
            m = Metrics.from_dict(r.metrics)
            cells = [md(visible(r.id)), outcome_cell(r), metric(m.max_abs_diff_vs_baseline),
                     _count_of(m.mismatched_vs_baseline, m.numel), metric(m.bitwise_equal_to_baseline), _rmse_pair(m),
                     _divergent(m.first_divergent_module), reason_cell(r)]
            lines.append(failing_row(row_line(cells), r, run, failing=r.outcome in FAILING))
        heading = (f"#### Cross-version correctness{where}: {tally(rows)}\n\n{about}" if part == 0 else
                   f"##### Cross-version correctness ({tally(rows)})\n\n" + ("" if shown else about))
        parts[part].append(Table(heading, table_header(headers), tuple(lines), tier=0 if part == 0 else 1,
                                 kind="correctness"))
    return parts


def _cross_order(r: CheckResult) -> tuple[int, float, str]:
    diff = number(Metrics.from_dict(r.metrics).max_abs_diff_vs_baseline)
    worst = -math.inf if diff is None else (math.inf if math.isnan(diff) else diff)
    return RANK[r.outcome], -worst, r.id


def _count_of(count: Any, numel: Any) -> str:
    n, total = number(count), number(numel)
    if n is None or not math.isfinite(n):
        return metric(count)
    return f"{int(n):,}" + (f" of {int(total):,}" if total is not None and math.isfinite(total) else "")


def _rmse_pair(m: Metrics) -> str:
    """The worst tensor's RMSE against the fp64 golden, the candidate's beside the baseline's."""
    tensors = [t for t in m.per_tensor or [] if isinstance(t, dict)]
    if not tensors:
        return ""
    worst = max(tensors, key=lambda t: (number(t.get("rmse")) or 0.0) / (number(t.get("scale")) or 1.0))
    cand, base = metric(worst.get("rmse")), metric(worst.get("ref_rmse"))
    return f"{cand or '—'} / {base or '—'} ({md(str(worst.get('name', '')))})"


def _divergent(first: Any) -> str:
    if not isinstance(first, dict) or not first.get("module"):
        return ""
    err = metric(first.get("max_abs_err"))
    return f"{md(first['module'])}" + (f" (max abs err {err})" if err else "")
