"""What `run` and `compare` share: flags -> Settings, the repro command, and the end of a command (no torch).

cli.py (the parser and the one error boundary) and compare_cmd.py both import this module; neither
imports the other's helpers, so there is no import circle. Errors are raised as UsageError for cli.main.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

from torch_upgrade_check import config, suite, values
from torch_upgrade_check.errors import EXIT_FAILED, EXIT_INFRA, EXIT_PASSED, EXIT_USAGE, UsageError
from torch_upgrade_check.model import FAIL_ON, CheckResult, CheckSpec, Outcome, Report, Verdict
from torch_upgrade_check.orchestrate import session
from torch_upgrade_check.report import merged_verdict
from torch_upgrade_check.schema import write_reports

PROG = "torch-upgrade-check"

DEFAULT_TIMEOUT_S = 300.0
INSTALL_LOG_TAIL_LINES = 30  # enough for pip's or uv's resolver explanation

T = TypeVar("T")


def say(text: str) -> None:
    print(text, flush=True)


def parse_latency_limits(items: Sequence[str]) -> dict[str, float]:
    """`--max-latency-ms NAME=MS` items -> {NAME: MS}; every bad item reported together."""
    problems: list[str] = []
    parsed = [values.collect(problems, values.latency_limit, item, "--max-latency-ms") for item in items]
    if problems:
        raise UsageError(*problems)
    return dict(p for p in parsed if p is not None)


def parse_workloads(items: Sequence[str]) -> list[suite.Workload]:
    """`NAME=module:function` -> user workloads, run through every model aspect (and cross-version, and dataloader where
    the factory returns a dataset) in float32."""
    workloads, problems = [], []
    for item in items:
        name, _, factory = item.partition("=")
        module, colon, function = factory.partition(":")
        if not name.strip() or not colon or not module.strip() or not function.strip():
            problems.append(f"--workload must be NAME=MODULE:FUNCTION, like tiny_gpt=mypkg.models:build, got {item!r}")
        elif name in suite.BUILTIN_NAMES or any(w.name == name for w in workloads):
            problems.append(f"--workload name {name!r} is already taken; choose another name")
        else:
            workloads.append(suite.Workload(name.strip(), ("float32",),
                                            (*suite.TRAINED_ASPECTS, "dataloader", "cross-version"),
                                            factory=factory.strip()))
    if problems:
        raise UsageError(*problems)
    return workloads


def parse_fail_on(text: str) -> frozenset[str]:
    items = {x.strip() for x in text.split(",") if x.strip()}
    if items == {"none"}:
        return frozenset()
    bad = sorted(items - set(FAIL_ON))
    if bad or not items:
        raise UsageError(f"--fail-on must be a comma list of {', '.join(FAIL_ON)}, or none, got {text!r}")
    return frozenset(items)


def settings_from_args(args: argparse.Namespace, argv: Sequence[str], *, cross_version: bool = False) -> session.Settings:
    """Validate every flag `run` and `compare` share, and the config file; all problems reported together.

    Precedence: command-line flags, then the config's per-workload values, then its thresholds,
    then the per-dtype defaults. The flags stay text on `args` (the repro command repeats them as typed).
    """
    problems: list[str] = []

    def flag(parse: Callable[[object, str], T], name: str) -> T | None:
        given = getattr(args, name)
        return None if given is None else values.collect(problems, parse, given, f"--{name}")

    rtol, atol = flag(values.tolerance, "rtol"), flag(values.tolerance, "atol")
    timeout_s, threads = flag(values.timeout, "timeout"), flag(values.threads, "threads")
    limits = values.collect(problems, parse_latency_limits, args.max_latency_ms)
    extra = values.collect(problems, parse_workloads, args.workload) or []
    fail_on = values.collect(problems, parse_fail_on, args.fail_on)
    if getattr(args, "fleet", None) is not None:
        from torch_upgrade_check.analysis.fleet import parse_fleet

        args.fleet_obj = values.collect(problems, parse_fleet, args.fleet, "--fleet")
    cfg = values.collect(problems, config.load_config, Path(args.config) if args.config else None,
                         explicit=args.config is not None)
    if cfg is not None:
        taken = {w.name for w in cfg.workloads}
        problems += [f"--workload name {w.name!r} is already a workload in {cfg.path}; choose another name"
                     for w in extra if w.name in taken]
    if problems:
        raise UsageError(*problems)
    args.fail_on_set = fail_on
    args.config_obj = cfg
    if threads is None and cfg is not None:
        threads = cfg.threads  # config key `threads:`; --threads overrides it
    params = {k: v for k, v in (("rtol", rtol), ("atol", atol)) if v is not None}
    python_path = [str(Path(p).resolve()) for p in args.python_path]
    if cfg is None:
        workloads = [*suite.BUILTIN, *extra]
        by_workload: dict[str, dict[str, float | bool]] = {}
    else:
        workloads = [*cfg.workloads_for_suite(cross_version=cross_version), *extra]
        by_workload = {w.name: {**cfg.tolerances_for(w.name, rtol=rtol, atol=atol), **cfg.options_for(w.name)}
                       for w in workloads}
        python_path = [*cfg.resolved_python_path(), *python_path]
    if getattr(args, "compile_time", False):
        workloads = [suite.with_compile_time(w) for w in workloads]
    if getattr(args, "ddp", False):
        workloads = [suite.with_ddp(w) for w in workloads]
    return session.Settings(
        out=Path(args.out), requested_device=args.device, only=tuple(args.only), workloads=tuple(workloads),
        timeout_s=DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s, threads=threads,
        python_path=tuple(python_path), max_latency_ms=limits or {}, params=params,
        params_by_workload=by_workload, command=(PROG, *argv),
        pytest_args=cfg.pytest.args if cfg is not None and cfg.pytest else None,
        config_root=cfg.root if cfg is not None else None,
    )


def with_device_limits(settings: session.Settings, args: argparse.Namespace, device: str) -> session.Settings:
    """Latency limits depend on the device: the config's for this device, then --max-latency-ms."""
    cfg = getattr(args, "config_obj", None)
    if cfg is None:
        return settings
    return replace(settings, max_latency_ms={**cfg.latency_limits(device), **settings.max_latency_ms})


def fleet_result(args: argparse.Namespace, environment: dict, device: str, repro: str) -> CheckResult | None:
    """`environment[-]/fleet` when the config names a fleet: does the torch under test serve its GPUs?"""
    from torch_upgrade_check.analysis import fleet

    archs, driver, _ = _fleet(args)
    if not (archs or driver):
        return None
    return fleet.judge(archs, driver, environment, label=str(environment.get("torch_version", "?")),
                       device=device, repro=repro)


def _fleet(args: argparse.Namespace) -> tuple[tuple[str, ...], str, int]:
    """The fleet of --fleet, else of the config's fleet: (archs, oldest driver, smallest card's bytes)."""
    cfg = getattr(args, "config_obj", None)
    return getattr(args, "fleet_obj", None) or ((cfg.fleet.archs, cfg.fleet.driver, cfg.fleet.memory)
                                                if cfg and cfg.fleet else ((), "", 0))


def fleet_memory(args: argparse.Namespace, report: Report, repro: str) -> Report:
    """`report` with `environment[-]/fleet-memory` added when the fleet names its smallest card's memory: every
    workload's measured peak device memory must fit in it (judged on CUDA; skipped, saying so, elsewhere)."""
    from torch_upgrade_check.analysis import fleet

    memory = _fleet(args)[2]
    if not memory:
        return report
    judged = fleet.judge_memory(memory, report.results, device=report.device, label=report.label, repro=repro)
    return replace(report, results=(*report.results, judged))


def fleet_flags(args: argparse.Namespace, only: str = "environment") -> list[str]:
    """The flags that run environment[-]/fleet again (the fleet as given, and nothing else); with only="memory",
    the memory checks that environment[-]/fleet-memory judges."""
    return ["--only", only, *(["--config", args.config] if args.config else []),
            *(["--fleet", args.fleet] if getattr(args, "fleet", None) else [])]


def repro_command(args: argparse.Namespace, head: Sequence[str], device: str, spec: CheckSpec) -> str:
    """A command that runs this one check again: `head` (the subcommand and the torch it runs), then the
    device, the check and every flag that shaped it, as the user typed them."""
    cmd = [PROG, *head, "--device", device, "--only", suite.rerun_pattern(spec.workload, spec.dtype, spec.aspect)]
    for item in args.workload:
        if item.partition("=")[0] == spec.workload:
            cmd += ["--workload", item]
    cmd += [x for p in args.python_path for x in ("--python-path", p)]
    cmd += ["--config", args.config] if args.config else []
    for name in ("rtol", "atol", "threads", "timeout"):
        if getattr(args, name) is not None:
            cmd += [f"--{name}", str(getattr(args, name))]
    if spec.aspect in ("latency", "compiled-latency"):
        cmd += [x for item in args.max_latency_ms for x in ("--max-latency-ms", item)]
    if spec.aspect == "compile-time" and getattr(args, "compile_time", False):
        cmd += ["--compile-time"]
    if spec.aspect == "warnings" and "warnings" in getattr(args, "fail_on_set", ()):
        cmd += ["--fail-on", args.fail_on]
    regression = {"latency": "max_latency_regression", "compiled-latency": "max_latency_regression",
                  "memory": "max_memory_regression", "compile-time": "max_compile_time_regression"}.get(spec.aspect)
    if regression and getattr(args, regression, None) is not None:  # compare only
        cmd += ["--" + regression.replace("_", "-"), getattr(args, regression)]
    return shlex.join(cmd)


def publish(args: argparse.Namespace, reports: list[Report], out: Path, report_path: Path | None) -> dict[str, str]:
    from torch_upgrade_check import github

    return github.publish(reports, out, environ=os.environ, report_path=report_path,
                          job_summary=not getattr(args, "no_job_summary", False))


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


def infra(args: argparse.Namespace, reports: list[Report], out: Path, message: str) -> int:
    tail = install_log_tail(out, message)
    message = f"{message}\n{tail}" if tail else message
    reports = [replace(r, infra_error=r.infra_error or message, finished=session.now()) for r in reports]
    write_reports(reports, out / "report.json")
    print(f"{PROG}: infrastructure error: {message}", file=sys.stderr)
    publish(args, reports, out, out / "report.json")
    return EXIT_INFRA


def team_input(args: argparse.Namespace, reports: list[Report], out: Path, message: str) -> int:
    """Exit 2 for the team's own input found wrong once the run began (a stack file that cannot be installed on
    its side): the report and summary are written first, with the check that found it; the one line names the
    file and the fix."""
    reports = [replace(r, finished=session.now()) for r in reports]
    write_reports(reports, out / "report.json")
    print(f"{PROG}: error: {message}", file=sys.stderr)
    publish(args, reports, out, out / "report.json")
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


def finish(args: argparse.Namespace, reports: list[Report], out: Path, report_path: Path | None, elapsed: float) -> int:
    publish(args, reports, out, report_path)
    verdict = merged_verdict(reports)
    deciding = [r for r in reports if r.role != "baseline"] or reports
    counts = {k: sum(r.counts()[k] for r in deciding) for k in deciding[0].counts()}
    text = ", ".join(f"{v} {k}" for k, v in counts.items() if v)
    code = exit_code(reports, getattr(args, "fail_on_set", frozenset(FAIL_ON)))
    note = " (--fail-on lets it pass)" if verdict is Verdict.FAILED and code == EXIT_PASSED else ""
    say(f"{PROG}: {verdict.value.upper()}{note} ({text or 'nothing ran'}) in {elapsed:.0f}s; "
        f"report: {report_path or out}")
    return code
