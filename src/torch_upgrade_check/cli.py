"""Command line: `run`, `report`, `merge`; main(argv) -> int is the one error boundary (no torch here)."""

from __future__ import annotations

import argparse
import datetime as dt
import math
import os
import shlex
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from torch_upgrade_check import __version__, suite
from torch_upgrade_check.analysis.verdicts import decide
from torch_upgrade_check.errors import EXIT_FAILED, EXIT_INFRA, EXIT_PASSED, EXIT_USAGE, UsageError
from torch_upgrade_check.model import DEVICES, CheckResult, CheckSpec, Observation, Outcome, Report, Verdict
from torch_upgrade_check.orchestrate.workers import InfrastructureError, run_worker
from torch_upgrade_check.report import merged_verdict
from torch_upgrade_check.schema import SchemaError, read_report, write_report

DEFAULT_OUT = "torch-upgrade-check-report"
PROG = "torch-upgrade-check"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Tell whether upgrading PyTorch is safe for your workloads.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    run = sub.add_parser("run", help="run the validation suite with one torch on one device")
    run.add_argument("--python", default=sys.executable, help="interpreter whose torch is tested (default: this one)")
    run.add_argument("--device", default="auto", choices=("auto", *DEVICES),
                     help="auto = cuda, else mps, else cpu (default: auto)")
    run.add_argument("--only", action="append", default=[], metavar="GLOB",
                     help="run only checks whose id, workload or aspect matches (repeatable)")
    run.add_argument("--out", default=DEFAULT_OUT, metavar="DIR", help=f"output folder (default: {DEFAULT_OUT})")
    run.add_argument("--timeout", type=float, default=300.0, metavar="SECONDS", help="per-check timeout (default: 300)")
    run.add_argument("--rtol", type=float, default=None, help="relative tolerance (default: per dtype)")
    run.add_argument("--atol", type=float, default=None, help="absolute tolerance (default: per dtype)")
    run.add_argument("--max-latency-ms", action="append", default=[], metavar="NAME=MS",
                     help="fail when the median latency of workload NAME (or checks matching a glob) exceeds MS")
    run.add_argument("--workload", action="append", default=[], metavar="NAME=MODULE:FUNCTION",
                     help="add your own workload: a factory returning (model, inputs) (repeatable)")
    run.add_argument("--python-path", action="append", default=[], metavar="DIR",
                     help="folder prepended to the worker's sys.path, to import --workload factories from")
    run.add_argument("--threads", type=int, default=None, help="torch CPU threads in the worker (default: torch's)")
    run.add_argument("--list", action="store_true", help="list the checks that would run, and exit")

    rep = sub.add_parser("report", help="re-render junit.xml and summary.md from a report.json")
    rep.add_argument("report", help="path of report.json")
    rep.add_argument("--junit", default=None, metavar="PATH", help="where to write JUnit XML")
    rep.add_argument("--summary", default=None, metavar="PATH", help="where to write the Markdown summary")

    merge = sub.add_parser("merge", help="combine reports from several runners into one summary and JUnit file")
    merge.add_argument("reports", nargs="+", help="report.json files")
    merge.add_argument("--out", default=DEFAULT_OUT, metavar="DIR", help=f"output folder (default: {DEFAULT_OUT})")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
        if args.command == "run":
            return cmd_run(args, argv)
        if args.command == "report":
            return cmd_report(args)
        return cmd_merge(args)
    except UsageError as e:
        for problem in e.problems:
            print(f"{PROG}: error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    except SchemaError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted; finished checks are in the report", file=sys.stderr)
        return 130


def parse_latency_limits(items: Sequence[str]) -> dict[str, float]:
    limits, problems = {}, []
    for item in items:
        name, sep, value = item.partition("=")
        try:
            ms = float(value)
        except ValueError:
            ms = math.nan
        if not sep or not name.strip() or not ms > 0 or math.isinf(ms):
            problems.append(f"--max-latency-ms must be NAME=MS with MS a positive number of milliseconds, "
                            f"like mlp=25, got {item!r}")
            continue
        limits[name.strip()] = ms
    if problems:
        raise UsageError(*problems)
    return limits


def _validate_run(args: argparse.Namespace) -> dict[str, float]:
    problems = []
    for flag in ("rtol", "atol", "timeout"):
        value = getattr(args, flag)
        if value is not None and not (value > 0 and math.isfinite(value)):
            problems.append(f"--{flag} must be a positive number, got {value!r}")
    if args.threads is not None and args.threads < 1:
        problems.append(f"--threads must be 1 or more, got {args.threads}")
    try:
        limits = parse_latency_limits(args.max_latency_ms)
    except UsageError as e:
        problems += e.problems
        limits = {}
    try:
        args.workloads = parse_workloads(args.workload)
    except UsageError as e:
        problems += e.problems
    if problems:
        raise UsageError(*problems)
    return limits


def parse_workloads(items: Sequence[str]) -> list[suite.Workload]:
    """`NAME=module:function` -> user workloads, run through every model aspect in float32."""
    workloads, problems = [], []
    for item in items:
        name, _, factory = item.partition("=")
        module, colon, function = factory.partition(":")
        if not name.strip() or not colon or not module.strip() or not function.strip():
            problems.append(f"--workload must be NAME=MODULE:FUNCTION, like tiny_gpt=mypkg.models:build, got {item!r}")
        elif name in suite.BUILTIN_NAMES or any(w.name == name for w in workloads):
            problems.append(f"--workload name {name!r} is already taken; choose another name")
        else:
            workloads.append(suite.Workload(name.strip(), ("float32",), suite.MODEL_ASPECTS, factory=factory.strip()))
    if problems:
        raise UsageError(*problems)
    return workloads


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def repro_command(args: argparse.Namespace, python: str, device: str, spec: CheckSpec) -> str:
    """A command that runs this one check again, with the flags that shaped it."""
    cmd = [PROG, "run", "--python", python, "--device", device, "--only", spec.id]
    for w in args.workloads:
        if w.name == spec.workload:
            cmd += ["--workload", f"{w.name}={w.factory}"]
    cmd += [x for p in args.python_path for x in ("--python-path", p)]
    cmd += [x for flag in ("rtol", "atol") if getattr(args, flag) is not None for x in (f"--{flag}", str(getattr(args, flag)))]
    return shlex.join(cmd)


def cmd_run(args: argparse.Namespace, argv: Sequence[str]) -> int:
    limits = _validate_run(args)
    out = Path(args.out)
    python = args.python
    params = {k: v for k, v in (("rtol", args.rtol), ("atol", args.atol)) if v is not None}
    thresholds = {"timeout_s": args.timeout, "max_latency_ms": limits, **params}
    report = Report(tool_version=__version__, device=args.device, requested_device=args.device, label="",
                    command=[PROG, *argv], started=_now(), thresholds=thresholds)
    if not os.path.exists(python) and not _which(python):
        return _infra(report, out, f"interpreter {python} not found; pass --python the path of a Python with torch")
    python = python if os.path.exists(python) else _which(python)
    try:
        shutil.rmtree(out / "logs", ignore_errors=True)
        probe = run_worker(python, [], log_dir=out / "logs", timeout_s=args.timeout, probe=DEVICES,
                           threads=args.threads, log_prefix="probe")
        python_path = [str(Path(p).resolve()) for p in args.python_path]
    except InfrastructureError as e:
        return _infra(report, out, str(e))
    device = _resolve_device(args.device, probe.probes)
    specs = [CheckSpec(s.workload, s.aspect, s.device, s.dtype, s.factory, params)
             for s in suite.plan((*suite.BUILTIN, *args.workloads), device, args.only)]
    if not specs:
        raise UsageError(f"--only {' '.join(args.only)} matches no check; try --list, or patterns like 'mlp', "
                         f"'latency' or 'flex*'")
    if args.list:
        for s in specs:
            print(s.id)
        return EXIT_PASSED
    env = {**probe.environment, "probes": {k: {"available": v[0], "reason": v[1]} for k, v in probe.probes.items()}}
    report = Report(**{**report.__dict__, "device": device, "label": env.get("torch_version", "?"), "environment": env})
    results: dict[str, CheckResult] = {s.id: CheckResult(s.workload, s.aspect, s.device, s.dtype, Outcome.NOT_RUN,
                                                          reason="not started", repro=repro_command(args, python, device, s))
                                       for s in specs}
    to_run = []
    for s in specs:
        skip = _planned_skip(s, args.device, probe.probes)
        if skip:
            results[s.id] = decide(s, Observation(s.id, "skipped", message=skip), repro=results[s.id].repro)
        else:
            to_run.append(s)
    print(f"{PROG} {__version__}: torch {report.label} on {device} ({env.get('cpu', '')}, "
          f"{env.get('threads')} threads), {len(specs)} checks -> {out}/", flush=True)
    write_report(_with(report, results), out / "report.json")
    started = time.monotonic()
    counter = iter(range(1, len(specs) + 1))
    width = len(str(len(specs)))

    def on_observation(spec: CheckSpec, obs: Observation) -> None:
        result = decide(spec, obs, max_latency_ms=limits, repro=results[spec.id].repro)
        results[spec.id] = result
        write_report(_with(report, results), out / "report.json")
        print(f"[{next(counter):>{width}}/{len(to_run)}] {result.outcome.value.upper():<7} {spec.id:<48} "
              f"{obs.duration_s:6.1f}s  {result.reason[:110]}", flush=True)

    try:
        run_worker(python, to_run, log_dir=out / "logs", timeout_s=args.timeout, threads=args.threads,
                   python_path=python_path, on_observation=on_observation)
    except InfrastructureError as e:
        return _infra(_with(report, results), out, str(e))
    final = Report(**{**_with(report, results).__dict__, "finished": _now(), "complete": True})
    write_report(final, out / "report.json")
    return _finish([final], out, out / "report.json", time.monotonic() - started)


def _with(report: Report, results: dict[str, CheckResult]) -> Report:
    return Report(**{**report.__dict__, "results": tuple(results.values())})


def _which(python: str) -> str:
    return shutil.which(python) or ""


def _resolve_device(requested: str, probes: dict[str, tuple[bool, str]]) -> str:
    if requested == "auto":
        return next((d for d in ("cuda", "mps") if probes.get(d, (False, ""))[0]), "cpu")
    available, reason = probes.get(requested, (False, f"{requested} was not probed"))
    if not available:
        raise UsageError(f"--device {requested} is not usable here: {reason}; use --device auto or --device cpu")
    return requested


def _planned_skip(spec: CheckSpec, requested: str, probes: dict[str, tuple[bool, str]]) -> str:
    if spec.aspect == "cross-backend" and spec.device == "cpu":
        if requested == "cpu":
            return "cross-backend compares an accelerator with the CPU, and --device cpu was asked"
        why = "; ".join(probes[d][1] for d in ("cuda", "mps") if d in probes)
        return f"no accelerator to compare with the CPU ({why})"
    return ""


def _infra(report: Report, out: Path, message: str) -> int:
    final = Report(**{**report.__dict__, "infra_error": message, "finished": _now()})
    write_report(final, out / "report.json")
    print(f"{PROG}: infrastructure error: {message}", file=sys.stderr)
    _publish([final], out, out / "report.json")
    return EXIT_INFRA


def _publish(reports: list[Report], out: Path, report_path: Path | None) -> dict[str, str]:
    from torch_upgrade_check import github

    return github.publish(reports, out, environ=os.environ, report_path=report_path)


def _finish(reports: list[Report], out: Path, report_path: Path | None, elapsed: float) -> int:
    _publish(reports, out, report_path)
    verdict = merged_verdict(reports)
    counts = {k: sum(r.counts()[k] for r in reports) for k in reports[0].counts()}
    summary = ", ".join(f"{v} {k}" for k, v in counts.items() if v)
    print(f"{PROG}: {verdict.value.upper()} ({summary or 'nothing ran'}) in {elapsed:.0f}s; "
          f"report: {report_path or out}", flush=True)
    return {Verdict.PASSED: EXIT_PASSED, Verdict.FAILED: EXIT_FAILED, Verdict.ERROR: EXIT_INFRA}[verdict]


def cmd_report(args: argparse.Namespace) -> int:
    from torch_upgrade_check import github

    report = read_report(Path(args.report))
    out = Path(args.report).parent
    github.publish([report], out, environ=os.environ, report_path=Path(args.report),
                   junit_path=Path(args.junit) if args.junit else None,
                   summary_path=Path(args.summary) if args.summary else None)
    return {Verdict.PASSED: EXIT_PASSED, Verdict.FAILED: EXIT_FAILED, Verdict.ERROR: EXIT_INFRA}[report.verdict()]


def cmd_merge(args: argparse.Namespace) -> int:
    reports = [read_report(Path(p)) for p in args.reports]
    return _finish(reports, Path(args.out), None, 0.0)
