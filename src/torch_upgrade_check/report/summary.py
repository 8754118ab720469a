"""Reports -> the GitHub-flavoured Markdown job summary, kept under a byte budget.

Read in one screen: the verdict, the counts, what needs attention, and everything else collapsed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from torch_upgrade_check.aspects import AB_ASPECTS, APART_ASPECTS, ASPECTS
from torch_upgrade_check.model import ABState, CheckResult, Outcome, Report, Verdict
from torch_upgrade_check.report import (
    CHANGES,
    CORRECTNESS_ASPECTS,
    clip,
    deciding,
    device_mismatch,
    merged_verdict,
    nothing_ran,
    one_line,
    run_names,
    shared_count,
    shared_phrase,
    total_counts,
)
from torch_upgrade_check.report.checks import aspect_tables, in_part, matrix
from torch_upgrade_check.report.comparison import comparison_tables, is_shown_here, pairs
from torch_upgrade_check.report.markdown import (
    ICON,
    Table,
    by_kind,
    collapse,
    cut,
    fixed_size,
    md,
    plan,
    plural,
    render_tables,
    row_line,
    size,
    table_header,
    tail_block,
    truncation_notice,
)
from torch_upgrade_check.report.unjudged import not_judged, not_judged_note

BUDGET_BYTES = 900_000  # GitHub drops a step summary over 1 MiB; the margin leaves room for other steps
_ENV_ORDER = ("torch_version", "torch_git", "cuda", "cudnn", "nccl", "triton", "cuda_devices", "driver")
_ENV_ORDER += ("python", "os", "cpu", "threads")
_ENV_HIDDEN = ("packages",)  # every installed package is in report.json; a comparison shows those that changed
_SKIP_REASONS = 3  # distinct skip reasons named when nothing ran
_OVER_BUDGET = 5  # checks named that may outlive their timeout (report.json's thresholds list them all)


def render_summary(reports: Sequence[Report], *, budget_bytes: int = BUDGET_BYTES) -> str:
    """The job summary, in the order a reviewer needs it: the verdict line, the counts, then (open) what needs
    attention: regressions, failed, errored, not-run and suspicious checks with reasons, repro commands and
    details; runs that could not happen; the environment diff when more than torch changed. Then, collapsed:
    everything that passed (per-aspect tables, improved and unchanged comparisons), the baselines' own checks,
    the environment. A passing run shows a few lines.

    Over `budget_bytes` (UTF-8), rows are dropped on purpose, in this order of keeping: failing rows,
    their repro commands and details, the other rows (what needs attention first, then the passing checks,
    unchanged and baseline rows last); the text then says how many were left out.
    """
    runs = list(zip(reports, run_names(reports)))
    decide = {id(r) for r in deciding(reports)}
    main = [(r, name) for r, name in runs if id(r) in decide]
    informing = [(r, name) for r, name in runs if id(r) not in decide]
    compared = [comparison_tables(runs[c], runs[b] if b is not None else None) for c, b in pairs(reports)]
    merged = len(main) > 1  # several runners: a check × run matrix, its checks that need attention shown open
    attention = [t for c in compared for t in c.attention]
    attention += (matrix(main, "attention") if merged else []) + aspect_tables(main, "attention")
    attention = by_kind(attention)  # correctness failures first, as the headline names them
    notes = _notes(runs, decide)
    checks_above = bool(attention)
    if attention or notes:
        attention.insert(0, Table("### What needs attention\n\n" + notes, "", ()))
    infra = _infra_section(runs)
    rest = [t for c in compared for t in c.rest]
    rest += (matrix(main, "rest") if merged else []) + aspect_tables(main, "rest")
    tables = [*attention, *([Table(infra, "", ())] if infra else []), *(t for c in compared for t in c.environment),
              *collapse(rest, _rest_summary(main, checks_above)), *_baseline_tables(informing)]
    head = f"## {md(headline(reports))}\n\n"
    body = _counts_table(runs, decide)
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
    in a comparison "❌ failed: 1 latency regression, 1 suspicious — 12 checks on cpu, torch 2.12.0 → 2.13.0" (each
    side's installed torch; "torch 2.13.0 on both sides" when only the stacks differ), and
    "⚠️ passed: …; 3 cross-version checks not judged: the baseline failed them" where those compared nothing.
    Only the deciding reports count (a comparison's baseline informs); a run that could not happen always does.
    A correctness failure the baseline shares at the same size is counted apart from the suspicious checks: "✅ passed:
    12 checks on cpu, torch 2.13.0 → 2.14.1 (2 failures the baseline shares (the model's own, not the upgrade's))"."""
    if not reports:
        return "❌ failed: no reports, so nothing ran"
    decide = deciding(reports)
    verdict, counts = merged_verdict(reports), total_counts(reports)
    devices = ", ".join(dict.fromkeys(one_line(r.device) for r in decide))
    versions = [_sides(one_line(reports[b].label), one_line(reports[c].label)) for c, b in pairs(reports) if b is not None]
    scope = f"{plural(sum(counts.values()), 'check')} on {devices}" + "".join(f", {v}" for v in dict.fromkeys(versions))
    shared = shared_count(reports)
    suspicious = counts["suspicious"] - shared
    notes = [*([shared_phrase(shared)] if shared else []), *([f"{suspicious} suspicious"] if suspicious else []),
             *([f"{counts['skipped']} skipped"] if counts["skipped"] else [])]
    unjudged = not_judged_note(not_judged(reports))  # compared with nothing: never a plain green
    if verdict is Verdict.PASSED:
        return (f"{'⚠️' if unjudged else '✅'} passed: {scope}" + (f" ({', '.join(notes)})" if notes else "")
                + (f"; {unjudged}" if unjudged else ""))
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
    if shared:
        parts.append(shared_phrase(shared))
    if suspicious:
        parts.append(f"{suspicious} suspicious")
    if unjudged:
        parts.append(unjudged)
    idle = [name for r, name in runs if any(r is d for d in decide) and nothing_ran(r)]
    if idle:
        skipped = f" ({counts['skipped']} skipped)" if counts["skipped"] else ""
        parts.append(f"nothing ran{skipped}" if len(decide) == 1 else f"nothing ran on {', '.join(idle)}")
    icon, word = ("💥", "error") if verdict is Verdict.ERROR else ("❌", "failed")
    return f"{icon} {word}: {', '.join(parts)} — {scope}"


def _sides(baseline: str, candidate: str) -> str:
    """Each side's installed torch: `torch 2.13.0 → 2.14.1`, or `torch 2.13.0 on both sides` (the stacks compared)."""
    return f"torch {candidate} on both sides" if baseline == candidate else f"torch {baseline} → {candidate}"


def _failure_kind(r: CheckResult) -> tuple[str, str]:
    """(its aspect, "regression") for a failed A/B comparison, ("correctness", "failure") and so on otherwise."""
    group = "correctness" if r.aspect in CORRECTNESS_ASPECTS else one_line(r.aspect)
    return group, "regression" if r.aspect in AB_ASPECTS and r.metrics.get("change") == ABState.REGRESSION else "failure"


def _index(order: Sequence[str], item: str) -> int:
    return order.index(item) if item in order else len(order)


def _notes(runs: Sequence[tuple[Report, str]], decide: set[int]) -> str:
    """Lines on runs as a whole: where nothing ran (and the skip reasons that say why), where the checks ran on
    another device than the one requested."""
    lines = []
    for report, name in runs:
        if id(report) in decide and nothing_ran(report):
            skipped = Counter(one_line(r.reason) or "no reason given" for r in report.results
                              if r.outcome is Outcome.SKIPPED)
            if skipped:
                why = "; ".join(f"{md(clip(reason, 200))} ({n})" for reason, n in skipped.most_common(_SKIP_REASONS))
                more = len(skipped) - _SKIP_REASONS
                why += f"; and {plural(more, 'other reason')}" if more > 0 else ""
                text = f"nothing ran, which fails: {plural(sum(skipped.values()), 'check')} skipped: {why}"
            else:
                text = "nothing ran, which fails: the run reported no check"
            lines.append(f"- {ICON[Outcome.NOT_RUN]} **{md(name)}**: {text}")
        if id(report) not in decide:
            lines += _baseline_broke(report, name, [r for r, _ in runs if id(r) in decide])
        lines += _over_budget(report, name)
        mismatch = device_mismatch(report)
        if mismatch:
            asked, got = md(mismatch[0]), md(mismatch[1])
            lines.append(f"- {ICON[Outcome.SUSPICIOUS]} **{md(name)}**: {asked} was requested but the checks ran on {got}")
    return "".join(line + "\n" for line in lines) + ("\n" if lines else "")


def _over_budget(report: Report, name: str) -> list[str]:
    """A line naming the checks expected to outlive their per-check timeout, and what to set (the run said so at its
    start: orchestrate.budget)."""
    over = report.thresholds.get("over_budget")
    if not isinstance(over, list) or not over:
        return []
    shown = "; ".join(md(clip(one_line(str(line)), 300)) for line in over[:_OVER_BUDGET])
    more = f"; and {plural(len(over) - _OVER_BUDGET, 'other check')}" if len(over) > _OVER_BUDGET else ""
    return [f"- {ICON[Outcome.SUSPICIOUS]} **{md(name)}**: {plural(len(over), 'check')} may not finish within the "
            f"per-check timeout: {shown}{more}"]


def _baseline_broke(baseline: Report, name: str, deciding_reports: Sequence[Report]) -> list[str]:
    """A line when the baseline's own checks crashed, or failed so that the candidate's cross-version checks could not
    be judged: they do not decide, but each is a question the run left open (a baseline whose companion cannot load
    on this runner, say); the baseline's first reasons say why."""
    broke = [r for r in baseline.results if r.outcome in (Outcome.FAILED, Outcome.ERROR)]
    if not broke:
        return []
    ids = {r.id for r in broke}
    unjudged = sum(1 for report in deciding_reports if report.device == baseline.device for r in report.results
                   if r.aspect in APART_ASPECTS and r.outcome is Outcome.SKIPPED and r.id in ids)
    reasons = Counter(f"{r.id}: {one_line(r.reason)}" if r.workload == "stack" else one_line(r.reason) for r in broke)
    why = "; ".join(md(clip(reason, 200)) + (f" ({n})" if n > 1 else "")
                    for reason, n in reasons.most_common(_SKIP_REASONS))
    if not unjudged and not any(r.outcome is Outcome.ERROR for r in broke):
        return []  # a baseline's failure the candidate shares is shown as pre-existing where that check is
    open_ = f", so {plural(unjudged, 'cross-version check')} could not be judged" if unjudged else ""
    return [f"- {ICON[Outcome.SUSPICIOUS]} **{md(name)}**: {plural(len(broke), 'of its own check')} failed or crashed "
            f"(they inform and do not decide){open_}: {why}"]


def _rest_summary(main: Sequence[tuple[Report, str]], after_attention: bool) -> str:
    """The line that stands for the collapsed tables: "✅ All 9 checks passed", "The other 6 checks: 5 passed
    (1 improved and 2 unchanged against the baseline), 1 skipped"."""
    results = [r for report, _ in main for r in report.results if in_part(r, "rest")]
    tally = Counter(r.outcome for r in results)
    changes = Counter(r.metrics.get("change") for report, _ in main for r in report.results
                      if is_shown_here(report, r) and r.aspect in AB_ASPECTS and in_part(r, "rest"))
    against = " and ".join(f"{changes[c]} {c}" for c in CHANGES if changes[c])
    against = f" ({against} against the baseline)" if against else ""
    checks = plural(len(results), "check")
    if set(tally) == {Outcome.PASSED}:
        which = "The other" if after_attention else f"{ICON[Outcome.PASSED]} {'All' if len(results) > 1 else 'The'}"
        return f"{which} {checks} passed{against}"
    parts = [f"{n} {o.value}" + (against if o is Outcome.PASSED else "")
             for o, n in sorted(tally.items(), key=lambda kv: list(Outcome).index(kv[0]))]
    return f"{'The other' if after_attention else 'The'} {checks}: {', '.join(parts)}"


def _baseline_tables(runs: Sequence[tuple[Report, str]]) -> list[Table]:
    """The baselines' own tables, collapsed: they explain a comparison and never decide the verdict."""
    what = "; ".join(f"{name}: {plural(len(r.results), 'check')}" for r, name in runs)
    return collapse(aspect_tables(runs, "informs"), f"Baseline checks ({what}); they inform and do not decide")


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
