"""The one module that touches GitHub: junit.xml and summary.md, the step summary, outputs, workflow commands."""

from __future__ import annotations

import re
import sys
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from torch_upgrade_check.model import Report
from torch_upgrade_check.report.annotations import MAX_ERRORS, annotations, command, escape_data
from torch_upgrade_check.report.outputs import action_outputs, error_outputs
from torch_upgrade_check.report.summary import BUDGET_BYTES, render_summary
from torch_upgrade_check.schema import atomic_write_text

STEP_SUMMARY_LIMIT = 1024 * 1024  # GitHub drops a step's summary above this size
MIN_SUMMARY_BYTES = 4096  # below this much room, appending would only show a truncation notice
# What a problem is about, for its annotation's title: `input 'rtol' must ...` -> input 'rtol'
_SUBJECT = re.compile(r"^(input '[^']*'|--[a-z][a-z-]*)")


def publish(
    reports: Sequence[Report],
    out_dir: Path,
    *,
    environ: Mapping[str, str],
    report_path: Path | None = None,
    job_summary: bool = True,
    stream: TextIO | None = None,
    junit_path: Path | None = None,
    summary_path: Path | None = None,
) -> dict[str, str]:
    """Write junit.xml and summary.md (by default in out_dir); on GitHub also the step summary, the
    workflow commands (when GITHUB_ACTIONS is "true") and the outputs. Returns the outputs."""
    out_dir = Path(out_dir)
    junit_path = Path(junit_path) if junit_path else out_dir / "junit.xml"
    summary_path = Path(summary_path) if summary_path else out_dir / "summary.md"
    junit = write_junit(reports, junit_path)
    summary = render_summary(reports)
    atomic_write_text(summary_path, summary)
    if job_summary and environ.get("GITHUB_STEP_SUMMARY"):
        append_step_summary(Path(environ["GITHUB_STEP_SUMMARY"]), reports, summary)
    if environ.get("GITHUB_ACTIONS") == "true":
        stream = sys.stdout if stream is None else stream
        for line in annotations(reports):
            print(line, file=stream)
        stream.flush()
    paths = {
        "report": str(Path(report_path).resolve()) if report_path else "",
        "junit": str(junit.resolve()) if junit else "",
        "summary": str(summary_path.resolve()),
    }
    outputs = action_outputs(reports, paths)
    set_outputs(outputs, environ=environ)
    return outputs


def write_junit(reports: Sequence[Report], path: Path) -> Path | None:
    """Write the JUnit file and return its path; without junitparser (a GPU box with only torch and PyYAML) say
    so on stderr and write none: report.json and summary.md carry everything it would."""
    try:
        from torch_upgrade_check.report.junit import build_junit, junit_to_string
    except ImportError as e:
        print(f"torch-upgrade-check: {path} not written: {e.name or 'junitparser'} is not installed "
              "(pip install 'junitparser>=3.1'); report.json and summary.md have every result", file=sys.stderr)
        return None
    atomic_write_text(path, junit_to_string(build_junit(reports)))
    return path


def quiet_environ(environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` without GitHub's files and workflow commands: for a child run of this tool whose parent alone
    writes the step's summary, outputs and annotations (bisect's compare steps)."""
    return {k: v for k, v in environ.items() if k not in ("GITHUB_ACTIONS", "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY")}


def relayed_environ(environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` without the step's outputs file: for a child run of this tool that writes its own summary and
    annotations, but whose outputs the parent relays under names of its own (the action's `bisect-*`)."""
    return {k: v for k, v in environ.items() if k != "GITHUB_OUTPUT"}


def publish_text(
    summary: str,
    junit: str,
    outputs: Mapping[str, str],
    out_dir: Path,
    *,
    environ: Mapping[str, str],
    job_summary: bool = True,
) -> dict[str, str]:
    """Write summary.md and junit.xml already rendered (bisect's), append the summary to the step summary
    when it fits, and write the outputs on GitHub. Returns the outputs."""
    out_dir = Path(out_dir)
    atomic_write_text(out_dir / "summary.md", summary)
    atomic_write_text(out_dir / "junit.xml", junit)
    if job_summary and environ.get("GITHUB_STEP_SUMMARY"):
        path = Path(environ["GITHUB_STEP_SUMMARY"])
        if len(summary.encode("utf-8", "replace")) <= _room(path):
            _append(path, summary)
    set_outputs(outputs, environ=environ)
    return dict(outputs)


def append_step_summary(path: Path, reports: Sequence[Report], summary: str) -> None:
    """Append to the step summary; re-render smaller when what the step already wrote leaves less room.

    Skipped entirely when less than MIN_SUMMARY_BYTES remain (summary.md still has the whole text).
    """
    room = min(BUDGET_BYTES, _room(path))
    if room < MIN_SUMMARY_BYTES:
        return
    if len(summary.encode("utf-8", "replace")) > room:
        summary = render_summary(reports, budget_bytes=room)
    _append(path, summary)


def _room(path: Path) -> int:
    """Bytes the step summary can still take under GitHub's limit (2 for the separating newline)."""
    return STEP_SUMMARY_LIMIT - (path.stat().st_size if path.exists() else 0) - 2


def _append(path: Path, text: str) -> None:
    used = path.exists() and path.stat().st_size > 0
    with path.open("a", encoding="utf-8", errors="replace") as f:
        f.write(("\n" if used else "") + text)


def format_outputs(outputs: Mapping[str, str]) -> str:
    """GITHUB_OUTPUT text in the multi-line form `name<<delimiter`, value, `delimiter`, for every value.

    Each delimiter is random and checked against the value, so no value can end its block early.
    """
    text = ""
    for name, value in outputs.items():
        if not name or any(c in name for c in "\r\n<=") or name.strip() != name:
            raise ValueError(f"output name {name!r} cannot be written to GITHUB_OUTPUT; use letters, digits, - and _")
        delimiter = f"ghadelimiter_{uuid.uuid4()}"
        while delimiter in value:
            delimiter = f"ghadelimiter_{uuid.uuid4()}"
        text += f"{name}<<{delimiter}\n{value}\n{delimiter}\n"
    return text


def write_outputs(path: Path, outputs: Mapping[str, str]) -> None:
    """Append the outputs to the GITHUB_OUTPUT file (other steps' lines stay)."""
    with path.open("a", encoding="utf-8", errors="replace") as f:
        f.write(format_outputs(outputs))


def set_outputs(outputs: Mapping[str, str], *, environ: Mapping[str, str]) -> None:
    """The step's outputs, for the steps after it (GITHUB_OUTPUT); nothing outside GitHub Actions."""
    if environ.get("GITHUB_OUTPUT"):
        write_outputs(Path(environ["GITHUB_OUTPUT"]), outputs)


def stopped_early(
    problems: Sequence[str],
    *,
    environ: Mapping[str, str],
    title: str = "torch-upgrade-check: bad input",
    stream: TextIO | None = None,
) -> dict[str, str]:
    """A run that ended before any report (a bad input, flag or config): on GitHub one `::error` per problem,
    titled by the input or flag it names, and the outputs `verdict=error` with every count 0, so the run page
    and the steps after this one say what went wrong rather than only "exit code 2". Returns the outputs."""
    if environ.get("GITHUB_ACTIONS") == "true":
        stream = sys.stdout if stream is None else stream
        for problem in problems[:MAX_ERRORS]:
            m = _SUBJECT.match(problem)
            print(command("error", f"torch-upgrade-check: {m.group(1)}" if m else title, problem), file=stream)
        if len(problems) > MAX_ERRORS:  # GitHub shows 10 error annotations per step; the log has every line
            print(command("notice", "torch-upgrade-check", f"and {len(problems) - MAX_ERRORS} more problems: "
                                                           "see the step's log"), file=stream)
        stream.flush()
    outputs = error_outputs()
    set_outputs(outputs, environ=environ)
    return outputs


def warning(title: str, message: str, *, environ: Mapping[str, str], stream: TextIO | None = None) -> None:
    """One `::warning` annotation on GitHub (escaped); nothing elsewhere, where the caller prints the line itself."""
    if environ.get("GITHUB_ACTIONS") == "true":
        print(command("warning", title, message), file=sys.stdout if stream is None else stream, flush=True)


@contextmanager
def group(title: str, *, environ: Mapping[str, str], stream: TextIO | None = None) -> Iterator[None]:
    """A foldable group in the job's log around what the block prints (GitHub Actions: `::group::` and
    `::endgroup::`, also when the block raises); elsewhere just the title, as a plain line.

    GitHub's groups do not nest or interleave: one group holds one stage, however many threads print in it.
    """
    stream = sys.stdout if stream is None else stream
    on_github = environ.get("GITHUB_ACTIONS") == "true"
    title = " ".join(title.split())  # one line: a newline would end the command early
    print(f"::group::{escape_data(title)}" if on_github else title, file=stream, flush=True)
    try:
        yield
    finally:
        if on_github:
            print("::endgroup::", file=stream, flush=True)
