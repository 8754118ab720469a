"""Reports -> GitHub workflow commands (`::error`, `::warning`, `::notice`), escaped and capped."""

from __future__ import annotations

from collections.abc import Sequence

from torch_upgrade_check.model import ABState, CheckResult, Outcome, Report
from torch_upgrade_check.report import (
    FAILING,
    clip,
    deciding,
    device_mismatch,
    nothing_ran,
    number,
    one_line,
    run_names,
    sig,
    visible,
    warning_word,
)

MAX_ERRORS = 10  # GitHub shows at most 10 error and 10 warning annotations per step
MAX_WARNINGS = 10
TITLE_LIMIT = 200
MESSAGE_LIMIT = 2000


def annotations(reports: Sequence[Report]) -> list[str]:
    """One `::error` per failing check (a regression names its ratio and CI, a cross-version failure its first
    divergent module) or failed run, one `::warning` per suspicious change, skipped accelerator check or device
    fallback; beyond 10 of either, one `::notice` says how many more the job summary holds.

    A comparison's baseline informs only: of it, just a run that could not happen at all is annotated.
    """
    errors: list[tuple[str, str]] = []
    warnings: list[tuple[str, str]] = []
    decide = {id(r) for r in deciding(reports)}
    for report, run in zip(reports, run_names(reports)):
        if report.infra_error:
            errors.append((f"torch-upgrade-check could not run on {run}", report.infra_error))
        if id(report) not in decide:
            continue
        if not report.infra_error and nothing_ran(report):
            errors.append((f"nothing ran on {run}", "no check passed or failed; see the job summary"))
        mismatch = device_mismatch(report)
        if mismatch:
            asked, got = mismatch
            warnings.append((f"ran on {got}, not {asked}", f"{asked} was requested but the checks ran on {got}"))
        for r in report.results:
            if r.outcome in FAILING:
                word = "not run" if r.outcome is Outcome.NOT_RUN else r.outcome.value
                if r.outcome is Outcome.FAILED and r.metrics.get("change") in (ABState.REGRESSION, ABState.UNDECIDED):
                    word = "regressed" if r.metrics["change"] == ABState.REGRESSION else "undecided, beyond its threshold,"
                errors.append((f"{visible(r.id)} {word} on {run}", _message(r, word)))
            elif r.outcome is Outcome.SUSPICIOUS:
                word = warning_word(r)
                warnings.append((f"{visible(r.id)} {word} on {run}", _message(r, word)))
            elif r.outcome is Outcome.SKIPPED and r.device != "cpu":
                warnings.append((f"{visible(r.id)} skipped on {run}", r.reason or "skipped"))
    lines = [command("error", title, message) for title, message in errors[:MAX_ERRORS]]
    lines += [command("warning", title, message) for title, message in warnings[:MAX_WARNINGS]]
    overflow = ((len(errors) - MAX_ERRORS, "failing checks"), (len(warnings) - MAX_WARNINGS, "warnings"))
    more = [f"{n} more {what}" for n, what in overflow if n > 0]
    if more:
        lines.append(command("notice", "torch-upgrade-check", f"and {' and '.join(more)}: see the job summary"))
    return lines


def _message(r: CheckResult, word: str) -> str:
    """The reason (for an A/B change, already the ratio, its CI and the pairs that showed it), the first
    divergent module and the repro command."""
    lines = [r.reason or f"{r.aspect} check {word}"]
    first = r.metrics.get("first_divergent_module")
    if isinstance(first, dict) and first.get("module"):
        err = number(first.get("max_abs_err"))
        lines.append(f"first divergent module: {one_line(first['module'])}"
                     + (f" (max abs err {sig(err)})" if err is not None else ""))
    if r.repro and r.outcome in FAILING:
        lines.append(f"repro: {r.repro}")
    return "\n".join(line for line in lines if line)


def command(name: str, title: str, message: str) -> str:
    """`::name title=...::message` with GitHub's escaping: data escapes %, CR, LF; properties also : and ,."""
    title = escape_property(clip(one_line(title), TITLE_LIMIT))
    message = escape_data(clip(visible(message.strip(), keep="\t\n\r"), MESSAGE_LIMIT))
    return f"::{name} title={title}::{message}"


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")
