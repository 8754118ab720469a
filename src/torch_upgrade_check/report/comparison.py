"""Baseline vs candidate -> the "What changed" tables of the job summary (pure).

A comparison is a candidate report (role "candidate") and the baseline report of the same device. The
candidate's A/B results (latency, memory, ...) carry the A/B metrics (change, ratio, ci_low, ci_high, p_value,
baseline_median, candidate_median, batches (fresh process pairs), agreeing_batches, rounds, more_rounds,
threshold) and a one-line reason, its cross-version results the closeness to the baseline's outputs; the
baseline report itself is needed only for the checks it alone ran and its environment.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from torch_upgrade_check.aspects import AB_ASPECTS, APART_ASPECTS, ASPECTS, FAIL_KINDS, TIMED, ab_of
from torch_upgrade_check.aspects import part as aspect_part
from torch_upgrade_check.model import ABState, CheckResult, Report, Side
from torch_upgrade_check.report import (
    ATTENTION,
    BYTE_UNITS,
    CHANGES,
    FAILING,
    TIME_UNITS,
    attribution,
    best_unit,
    clip,
    number,
    one_line,
    ratio_number,
    ratio_with_ci,
    sig,
    visible,
)
from torch_upgrade_check.report.markdown import (
    CHANGE_ICON,
    ICON,
    RANK,
    REASON_LIMIT,
    Row,
    Table,
    failing_row,
    md,
    metric,
    outcome_cell,
    plural,
    reason_cell,
    row_line,
    table_header,
)

# Rows of the environment diff: (label, environment key, dotted for nested); torch always shows, the others
# only when they differ: "cuDNN 9.8 -> 9.10 came with this torch" is often the real answer to "why did this change".
ENV_DIFF = (("torch", "torch_version"), ("torch git", "torch_git"), ("CUDA runtime", "cuda"), ("cuDNN", "cudnn"),
            ("NCCL", "nccl"), ("Triton", "triton"), ("driver", "driver"), ("GPU", "cuda_devices"),
            ("compute capability", "cuda_device.compute_capability"), ("TF32 / float32 precision flags (default)",
            "cuda_device.fp32_precision_default"), ("macOS", "macos"), ("MPS built", "mps_built"),
            ("MPS usable", "probes.mps.available"), ("Python", "python"), ("CPU threads", "threads"),
            ("OMP_WAIT_POLICY", "omp_wait_policy"), ("torch.compile settings (environment)", "compile_env"))
_TORCH_ROWS = ("torch", "torch git")  # what always changes in a comparison; anything else is news
_UNCHANGED_TIER = 2  # unchanged rows are kept after every other row of the report but the baseline's


def pairs(reports: Sequence[Report]) -> list[tuple[int, int | None]]:
    """(candidate index, baseline index or None) for each candidate, its baseline the first unused one of its device."""
    used: set[int] = set()
    found = []
    for i, report in enumerate(reports):
        if report.role != Side.CANDIDATE:
            continue
        base = next((j for j, b in enumerate(reports) if b.role == Side.BASELINE and b.device == report.device
                     and j not in used), None)
        if base is not None:
            used.add(base)
        found.append((i, base))
    return found


@dataclass(frozen=True)
class ComparisonTables:
    """One comparison's tables, by where the summary puts them."""

    attention: list[Table]  # regressions, suspicious and failing checks: shown open, first
    environment: list[Table]  # the environment diff, shown open when something besides torch changed
    rest: list[Table]  # improved, unchanged and passing checks, the checks in one version only: collapsed


def comparison_tables(candidate: tuple[Report, str], baseline: tuple[Report, str] | None) -> ComparisonTables:
    """What changed from the baseline to the candidate: latency and memory A/B, cross-version correctness,
    checks that ran in one version only, and the environment diff."""
    report, name = candidate
    before = baseline[0] if baseline else None
    # `where` ends the headings of the open tables: ", torch 2.12.0 → 2.13.0 on cuda" or " on cuda candidate 2.13.0"
    if before is not None:
        versions = f"torch {md(before.label)} → {md(report.label)} on {md(report.device)}"
        where, note = f", {versions}", ""
        title = f"#### What changed: {versions}\n\n"
    else:
        where, versions = f" on {md(name)}", ""
        note = "The baseline's report is not part of this summary.\n\n"
        title = f"#### What changed{where}\n\n{note}"
    attention: list[Table] = []
    rest: list[Table] = []
    for aspect in AB_ASPECTS:
        shown, other = _ab_tables(aspect, (report, name), before, where)
        attention, rest = attention + shown, rest + other
    for aspect in ASPECTS:  # an aspect's own tables (cross-version's: the candidate's outputs beside the baseline's)
        own = _own_comparison(aspect)
        if own is not None:
            shown, other = own([r for r in report.results if r.aspect == aspect], name, where)
            attention, rest = attention + shown, rest + other
    environment: list[Table] = []
    if before is not None:
        rest += _one_sided_table(report, before)
        diff, torch_only = _environment_diff(before, report)
        # "cuDNN 9.8 -> 9.10 came with this torch" is often the answer: shown open unless only torch changed
        if torch_only:
            rest += [replace(diff, heading="##### Environment changes\n\n")]
        else:
            environment = [replace(diff, heading=f"### Environment changes: {versions}\n\n")]
    if note and attention:
        attention[0] = replace(attention[0], heading=attention[0].heading + note)
    if rest:
        rest[0] = replace(rest[0], heading=title + rest[0].heading)
    elif not attention:
        rest = [Table(title + "No comparison results.\n\n", "", ())]
    return ComparisonTables(attention, environment, rest)


def _ab_tables(aspect: str, candidate: tuple[Report, str], baseline: Report | None,
               where: str) -> tuple[list[Table], list[Table]]:
    """One A/B aspect: the rows that need attention (regressions, failing, suspicious) with their reasons, then
    the others (improved, unchanged, no comparison) in one table that is the last kept when the budget is short."""
    report, run = candidate
    results = [r for r in report.results if r.aspect == aspect]
    if not results:
        return [], []
    before = {r.id: r for r in baseline.results} if baseline else {}
    kind, title = ab_of(aspect).unit, aspect_part(aspect, "render").TITLE  # its render.py's
    entries = [(r, _median(r, "baseline", before.get(r.id)), _median(r, "candidate", r))
               for r in sorted(results, key=_ab_order)]
    # Medians are in ms (latency) or bytes (memory), the base of TIME_UNITS and BYTE_UNITS.
    unit, factor = best_unit([v for _, *pair in entries for v in pair], TIME_UNITS if kind == "ms" else BYTE_UNITS)
    headers = ["check", f"baseline ({unit})", f"candidate ({unit})", "ratio (95% CI)", "pairs", "verdict"]
    threshold = {number(r.metrics.get("threshold")) for r in results} - {None}
    limit = f" (threshold +{sig(threshold.pop() * 100)}%)" if len(threshold) == 1 else ""
    shown, other = [], []
    for r, base, cand in entries:
        cells = [md(visible(r.id)), *("—" if v is None else metric(v, factor) for v in (base, cand)),
                 _ratio_cell(r.metrics), _pairs_cell(r)]
        if _needs_attention(r):
            line = row_line([*cells, _explained(r)])
            row = failing_row(line, r, run, failing=r.outcome in FAILING)
            # where a slower forward's time went, op by op: open, first under the table that holds the check
            shown.append((r, replace(row, lead=attribution.markdown_block(r, run))))
        else:
            other.append((r, Row(row_line([*cells, _verdict_cell(r)]), False)))
    tables: tuple[list[Table], list[Table]] = ([], [])
    if shown:
        heading = f"#### {title}{where}{limit}: {_abtally(r for r, _ in shown)}\n\n"
        tables[0].append(Table(heading, table_header(headers), tuple(row for _, row in shown),
                               kind=FAIL_KINDS.get(aspect, "correctness")))
    if other:
        heading = f"##### {title}{limit}: {_abtally(r for r, _ in other)}\n\n"
        tables[1].append(Table(heading, table_header(headers), tuple(row for _, row in other), tier=_UNCHANGED_TIER))
    return tables


def _needs_attention(r: CheckResult) -> bool:
    return r.outcome in ATTENTION or _change(r) in (ABState.REGRESSION, ABState.UNDECIDED, "suspicious")


def _abtally(results: Iterable[CheckResult]) -> str:
    counts = Counter(_change(r) or r.outcome.value for r in results)
    order = [*CHANGES, *(o.value for o in sorted(RANK, key=RANK.__getitem__))]
    return ", ".join(plural(counts[k], k) if k == ABState.REGRESSION else f"{counts[k]} {k}"
                     for k in sorted(counts, key=order.index))


def _change(r: CheckResult) -> str:
    change = r.metrics.get("change")
    return change if change in CHANGES else ""


def _ab_order(r: CheckResult) -> tuple[int, float, str]:
    """Regressions and failing checks, suspicious, improved, the rest (no comparison), unchanged; the largest
    ratio first (for improvements the smallest)."""
    change = _change(r)
    ratio = number(r.metrics.get("ratio"))
    ratio = math.inf if ratio is None or math.isnan(ratio) else ratio
    if change == ABState.REGRESSION or r.outcome in FAILING:
        return 0, -ratio, r.id
    rank = {ABState.UNDECIDED: 1, "suspicious": 1, ABState.IMPROVED: 2, ABState.UNCHANGED: 4}.get(change, 3)
    return rank, ratio if rank == 2 else -ratio, r.id


def _median(r: CheckResult | None, side: str, single: CheckResult | None) -> float | None:
    """The comparison's median of one side, else what that side's own run measured (its render.py's MEDIAN)."""
    if r is not None and number(r.metrics.get(f"{side}_median")) is not None:
        return number(r.metrics.get(f"{side}_median"))
    return number(single.metrics.get(aspect_part(single.aspect, "render").MEDIAN.key)) if single is not None else None


def _ratio_cell(m: dict[str, Any]) -> str:
    ratio, low, high = (number(m.get(k)) for k in ("ratio", "ci_low", "ci_high"))
    if ratio is not None and math.isfinite(ratio) and low == high == ratio:
        return f"{ratio_number(ratio)}× (exact)"  # every round measured the same (peak memory usually does)
    return ratio_with_ci(m, compact=True) or "—"


def _pairs_cell(r: CheckResult) -> str:
    """The fresh process pairs measured; for a change, how many of them on their own agree with it."""
    batches, agreeing = number(r.metrics.get("batches")), number(r.metrics.get("agreeing_batches"))
    if batches is None or not math.isfinite(batches):
        return "—"
    changed = _change(r) in (ABState.REGRESSION, ABState.IMPROVED, ABState.UNDECIDED, "suspicious")
    if changed and agreeing is not None and math.isfinite(agreeing):
        return f"{int(agreeing)} of {int(batches)} agree"
    return f"{int(batches)}"


def _verdict_cell(r: CheckResult) -> str:
    """The change (improved, unchanged), or the outcome and reason of a check that has none (skipped)."""
    change = _change(r)
    if not change:
        return outcome_cell(r) + (f": {reason_cell(r)}" if r.reason else "")
    return f"{CHANGE_ICON[change]} {_within(r) or change}"


def _within(r: CheckResult) -> str:
    """For an `unchanged` check whose 95% interval leaves out 1: "slower, within the 10% threshold" (or faster,
    more, less): the state gates, the words say what was measured."""
    ratio, threshold = number(r.metrics.get("ratio")), number(r.metrics.get("threshold"))
    if _change(r) != ABState.UNCHANGED or r.metrics.get("significant") is not True or ratio is None or threshold is None:
        return ""
    up, down = ("slower", "faster") if r.aspect in TIMED else ("more", "less")
    return f"{up if ratio > 1 else down}, within the {threshold:.0%} threshold"


def _explained(r: CheckResult) -> str:
    """The verdict of a check that needs attention, as the analysis's one line: "🔺 regression: latency 1.32×
    slower (95% CI 1.27–1.37), 10 ms → 13.2 ms; confirmed in 3 of 3 fresh process pairs; ...". A check that
    failed for another reason than a regression (a --max-latency-ms limit, a crash) shows its outcome first."""
    change = _change(r)
    if change and (change == ABState.REGRESSION or r.outcome not in FAILING):
        icon, word = CHANGE_ICON[change], change
    else:
        icon, word = ICON[r.outcome], r.outcome.value
    reason = clip(one_line(r.reason), REASON_LIMIT)  # cut as every reason cell: detail_block's rule
    text = reason if reason.startswith(f"{word}:") else f"{word}: {reason}" if reason else word
    return f"{icon} {md(text)}"


def _one_sided_table(candidate: Report, baseline: Report) -> list[Table]:
    """Checks that ran in one version only (cross-version checks are the candidate's by nature): listed, not dropped."""
    before = {r.id: r for r in baseline.results if r.aspect not in APART_ASPECTS}
    after = {r.id: r for r in candidate.results if r.aspect not in APART_ASPECTS}
    only = sorted(set(before) ^ set(after), key=lambda i: (i not in after, i))
    if not only:
        return []
    rows = []
    for check in only:
        cand = after.get(check)
        cells = [md(visible(check)), _side_cell(before.get(check)), _side_cell(cand)]
        rows.append(Row(row_line(cells), cand is not None and cand.outcome in FAILING))
    rows.sort(key=lambda row: not row.key)
    new, gone = sum(c in after for c in only), sum(c in before for c in only)
    heading = f"##### Only in one version ({new} only in the candidate, {gone} only in the baseline)\n\n"
    return [Table(heading, table_header(["check", "baseline", "candidate"]), tuple(rows))]


def _side_cell(r: CheckResult | None) -> str:
    return "— (not in this version)" if r is None else outcome_cell(r)


def _environment_diff(baseline: Report, candidate: Report) -> tuple[Table, bool]:
    """The components that differ (torch always), and whether only torch did; the caller gives it a heading."""
    rows = []
    changed = [(label, _env(baseline.environment, key), _env(candidate.environment, key)) for label, key in ENV_DIFF]
    changed = [c for c, (label, key) in zip(changed, ENV_DIFF) if key == "torch_version" or c[1] != c[2]]
    changed += _package_changes(baseline.environment.get("packages"), candidate.environment.get("packages"),
                                _pinned_by_team(candidate))
    changed += _sdpa_choices(baseline, candidate)
    for label, before, after in changed:
        cells = [md(label), *("—" if v in (None, "", [], {}) else md(clip(one_line(_text(v)), 200)) for v in (before, after))]
        rows.append(Row(row_line(cells), True))
    torch_only = all(label in _TORCH_ROWS for label, _, _ in changed)
    return Table("", table_header(["component", "baseline", "candidate"]), tuple(rows)), torch_only


def _env(env: dict[str, Any], key: str) -> Any:
    value: Any = env
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _text(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return str(value)


def _package_changes(before: Any, after: Any, team: frozenset[str] = frozenset()) -> list[tuple[str, Any, Any]]:
    """Packages installed beside torch whose version differs (torch itself has its own row); those whose
    requirement the team changed between the sides say so (the rest moved with torch or the resolver)."""
    if not isinstance(before, dict) or not isinstance(after, dict):
        return []
    names = sorted(n for n in set(before) | set(after) if n != "torch" and before.get(n) != after.get(n))
    return [(f"package {n}" + (" (your requirements changed it)" if _canonical(n) in team else ""),
             before.get(n), after.get(n)) for n in names]


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pinned_by_team(candidate: Report) -> frozenset[str]:
    """The packages the candidate's checks found changed by the team's own requirements (the first check whose judge
    names them: resolve's)."""
    for r in candidate.results:
        judge = aspect_part(r.aspect, "judge")
        named = getattr(judge, "packages_the_team_changed", None)
        found = named(judge.Metrics.from_dict(r.metrics)) if named is not None else None
        if found is not None:
            return found
    return frozenset()


def _sdpa_choices(baseline: Report, candidate: Report) -> list[tuple[str, Any, Any]]:
    """Which SDPA backend torch's default dispatch picks for each attention check, where that changed."""
    def choices(report: Report) -> dict[str, str]:
        return {r.id: r.metrics["sdpa_backend"] for r in report.results if isinstance(r.metrics.get("sdpa_backend"), str)}

    before, after = choices(baseline), choices(candidate)
    return [(f"SDPA backend ({check.rsplit('/', 1)[0]})", before.get(check), after.get(check))
            for check in sorted(set(before) | set(after)) if before.get(check) != after.get(check)]


def is_shown_here(report: Report, r: CheckResult) -> bool:
    """A candidate's cross-version, latency and memory results are shown by its comparison (baseline beside
    candidate), not again among the per-aspect tables."""
    return report.role == Side.CANDIDATE and (r.aspect in AB_ASPECTS or _own_comparison(r.aspect) is not None)


def _own_comparison(aspect: str) -> Callable[[Sequence[CheckResult], str, str], tuple[list[Table], list[Table]]] | None:
    """An aspect's own tables of the comparison (its render.py's `comparison_tables`: cross-version's), or None."""
    return getattr(aspect_part(aspect, "render"), "comparison_tables", None)
