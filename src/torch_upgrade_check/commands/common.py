"""The end of every command: publish the report, an infrastructure or input error, the exit code; fleet results (no torch).

Each command module (run, compare, bisect, merge, report) imports this one; it imports none of them and not the
settings, so there is no import circle. Errors are raised as UsageError for cli.main.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from torch_upgrade_check.config import Config
from torch_upgrade_check.errors import EXIT_FAILED, EXIT_INFRA, EXIT_PASSED, EXIT_USAGE
from torch_upgrade_check.model import FAIL_ON, CheckResult, Outcome, Report, Verdict
from torch_upgrade_check.orchestrate import session
from torch_upgrade_check.report import merged_verdict
from torch_upgrade_check.report.unjudged import not_judged, not_judged_note
from torch_upgrade_check.schema import write_reports

PROG = "torch-upgrade-check"

INSTALL_LOG_TAIL_LINES = 30  # enough for pip's or uv's resolver explanation

Fleet = tuple[tuple[str, ...], str, int]  # the GPUs to serve: (archs, oldest driver, smallest card's bytes)


@dataclass(frozen=True)
class Output:
    """Where a command's report goes (--out), what fails it (--fail-on) and whether it writes the job summary."""

    out: Path
    fail_on: frozenset[str] = frozenset(FAIL_ON)
    job_summary: bool = True


def say(text: str) -> None:
    print(text, flush=True)


def with_device_limits(settings: session.Settings, cfg: Config | None, device: str) -> session.Settings:
    """Latency limits depend on the device: the config's for this device, then --max-latency-ms."""
    if cfg is None:
        return settings
    return replace(settings, max_latency_ms={**cfg.latency_limits(device), **settings.max_latency_ms})


def fleet_result(fleet: Fleet, environment: dict, device: str, repro: str) -> CheckResult | None:
    """`environment[-]/fleet` when a fleet is named: does the torch under test serve its GPUs?"""
    from torch_upgrade_check.analysis import fleet as judging

    archs, driver, _ = fleet
    if not (archs or driver):
        return None
    return judging.judge(archs, driver, environment, label=str(environment.get("torch_version", "?")),
                         device=device, repro=repro)


def fleet_memory(fleet: Fleet, report: Report, repro: Callable[[str], str]) -> Report:
    """`report` with `environment[-]/fleet-memory` added when the fleet names its smallest card's memory: every
    workload's measured peak device memory must fit in it (judged on CUDA; skipped, saying so, elsewhere). `repro`
    makes its repro command from the --only pattern of the checks it judges."""
    from torch_upgrade_check.aspects.fleet_memory import judge as judging

    memory = fleet[2]
    if not memory:
        return report
    judged = judging.judge_report(memory, report.results, device=report.device, label=report.label, repro=repro(judging.JUDGED))
    return replace(report, results=(*report.results, judged))


def publish(output: Output, reports: list[Report], report_path: Path | None) -> dict[str, str]:
    from torch_upgrade_check import github

    return github.publish(reports, output.out, environ=os.environ, report_path=report_path,
                          job_summary=output.job_summary)


def install_log_tail(out: Path, message: str, lines: int = INSTALL_LOG_TAIL_LINES) -> str:
    """The last lines of each install log (OUT/logs/install-*.log) that `message` names, "" when it names none.

    An installer's one-line reason often hides the cause (a resolver conflict, a proxy, a missing wheel for
    this platform) a few lines up; with the tail inline, the job's log, summary and annotation show it.
    """
    parts = []
    for log in sorted((out / "logs").glob("install-*.log")):
        if log.name not in message:
            continue
        try:
            tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
        except OSError:
            continue
        parts.append(f"last {len(tail)} lines of {log}:\n" + "\n".join(tail))
    return "\n".join(parts)


def infra(output: Output, reports: list[Report], message: str) -> int:
    tail = install_log_tail(output.out, message)
    message = f"{message}\n{tail}" if tail else message
    reports = [replace(r, infra_error=r.infra_error or message, finished=session.now()) for r in reports]
    write_reports(reports, output.out / "report.json")
    print(f"{PROG}: infrastructure error: {message}", file=sys.stderr)
    publish(output, reports, output.out / "report.json")
    return EXIT_INFRA


def team_input(output: Output, reports: list[Report], message: str) -> int:
    """Exit 2 for the team's own input found wrong once the run began (a stack file that cannot be installed on
    its side): the report and summary are written first, with the check that found it; the one line names the
    file and the fix."""
    reports = [replace(r, finished=session.now()) for r in reports]
    write_reports(reports, output.out / "report.json")
    print(f"{PROG}: error: {message}", file=sys.stderr)
    publish(output, reports, output.out / "report.json")
    return EXIT_USAGE


def exit_code(reports: Sequence[Report], fail_on: frozenset[str]) -> int:
    """0/1 by --fail-on: correctness = every failing check but latency, memory and warnings (crashes and not-run
    too); a warnings check fails only when `warnings` is in --fail-on (new warnings are otherwise suspicious)."""
    verdict = merged_verdict(reports)
    if verdict is Verdict.ERROR:
        return EXIT_INFRA
    if verdict is Verdict.PASSED:
        return EXIT_PASSED
    deciding = [r for r in reports if r.role != "baseline"]
    kinds = set()
    for r in deciding:
        c = r.counts()
        if not c["passed"] and not c["failed"] and not c["error"] and not c["suspicious"]:
            kinds.add("correctness")  # nothing ran
        for res in r.results:
            if res.outcome in (Outcome.FAILED, Outcome.ERROR, Outcome.NOT_RUN):
                kinds.add(res.fail_kind)
    return EXIT_FAILED if kinds & fail_on else EXIT_PASSED


def finish(output: Output, reports: list[Report], report_path: Path | None, elapsed: float) -> int:
    publish(output, reports, report_path)
    verdict = merged_verdict(reports)
    deciding = [r for r in reports if r.role != "baseline"] or reports
    counts = {k: sum(r.counts()[k] for r in deciding) for k in deciding[0].counts()}
    text = ", ".join(f"{v} {k}" for k, v in counts.items() if v)
    code = exit_code(reports, output.fail_on)
    note = " (--fail-on lets it pass)" if verdict is Verdict.FAILED and code == EXIT_PASSED else ""
    unjudged = not_judged_note(not_judged(reports))
    say(f"{PROG}: {verdict.value.upper()}{note} ({text or 'nothing ran'}{'; ' + unjudged if unjudged else ''}) "
        f"in {elapsed:.0f}s; report: {report_path or output.out}")
    return code
