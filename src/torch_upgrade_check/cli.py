"""Command line: `run`, `compare`, `report`, `merge`; main(argv) -> int is the one error boundary (no torch here)."""

from __future__ import annotations

import argparse
import math
import os
import shlex
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import NoReturn

from torch_upgrade_check import __version__, suite
from torch_upgrade_check.errors import EXIT_FAILED, EXIT_INFRA, EXIT_PASSED, EXIT_USAGE, UsageError
from torch_upgrade_check.model import ASPECTS, DEVICES, CheckSpec, Outcome, Report, Verdict
from torch_upgrade_check.orchestrate import session
from torch_upgrade_check.orchestrate.workers import InfrastructureError
from torch_upgrade_check.report import merged_verdict
from torch_upgrade_check.schema import SchemaError, read_reports, write_reports

DEFAULT_OUT = "torch-upgrade-check-report"
PROG = "torch-upgrade-check"
FAIL_ON = ("correctness", "latency", "memory")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")


def _add_run_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default="auto", choices=("auto", *DEVICES),
                   help="auto = cuda, else mps, else cpu (default: auto)")
    p.add_argument("--only", action="append", default=[], metavar="GLOB",
                   help="run only checks whose id, workload or aspect matches (repeatable)")
    p.add_argument("--out", default=DEFAULT_OUT, metavar="DIR", help=f"output folder (default: {DEFAULT_OUT})")
    p.add_argument("--timeout", type=float, default=300.0, metavar="SECONDS", help="per-check timeout (default: 300)")
    p.add_argument("--rtol", type=float, default=None, help="relative tolerance (default: per dtype)")
    p.add_argument("--atol", type=float, default=None, help="absolute tolerance (default: per dtype)")
    p.add_argument("--max-latency-ms", action="append", default=[], metavar="NAME=MS",
                   help="fail when the median latency of workload NAME (or checks matching a glob) exceeds MS")
    p.add_argument("--workload", action="append", default=[], metavar="NAME=MODULE:FUNCTION",
                   help="add your own workload: a factory returning (model, inputs) (repeatable)")
    p.add_argument("--python-path", action="append", default=[], metavar="DIR",
                   help="folder prepended to the worker's sys.path, to import --workload factories from")
    p.add_argument("--config", default=None, metavar="PATH",
                   help="config file (default: torch-upgrade-check.yml in the current folder, when present)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads in the worker (default: torch's)")
    p.add_argument("--fail-on", default="correctness,latency,memory", metavar="LIST",
                   help="what fails the command: a comma list of correctness, latency, memory, or none "
                        "(report only) (default: all three)")
    p.add_argument("--no-job-summary", action="store_true", help="do not append to $GITHUB_STEP_SUMMARY")
    p.add_argument("--list", action="store_true", help="list the checks that would run, and exit")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Tell whether upgrading PyTorch is safe for your workloads.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    run = sub.add_parser("run", help="run the validation suite with one torch on one device")
    run.add_argument("--python", default=sys.executable, help="interpreter whose torch is tested (default: this one)")
    _add_run_args(run)

    cmp = sub.add_parser("compare", help="run the suite under a baseline and a candidate torch and say what changed")
    cmp.add_argument("--candidate", metavar="SPEC",
                     help="candidate torch: a version (2.13.0), a range ('>=2.13,<2.14'), nightly, test or current")
    cmp.add_argument("--baseline", metavar="SPEC", help="baseline torch, same forms (default: none: candidate only)")
    cmp.add_argument("--candidate-python", metavar="PATH", help="a prepared interpreter for the candidate, instead of SPEC")
    cmp.add_argument("--baseline-python", metavar="PATH", help="a prepared interpreter for the baseline, instead of SPEC")
    cmp.add_argument("--python", default=sys.executable,
                     help="interpreter for SPEC 'current' and to build venvs from (default: this one)")
    cmp.add_argument("--torch-backend", default="auto", metavar="BACKEND",
                     help="auto, pypi, cpu, cu126, cu128, ..., rocmX.Y (default: auto)")
    cmp.add_argument("--installer", default="auto", choices=("auto", "uv", "pip"),
                     help="auto = uv when on PATH, else pip (default: auto)")
    cmp.add_argument("--index-url", default="", metavar="URL", help="index for torch, replacing the backend's")
    cmp.add_argument("--extra-index-url", action="append", default=[], metavar="URL", help="extra index (repeatable)")
    cmp.add_argument("--find-links", action="append", default=[], metavar="PATH", help="wheel folder (repeatable)")
    cmp.add_argument("--extra-requirement", action="append", default=[], metavar="REQ",
                     help="another package for both venvs, e.g. numpy (repeatable)")
    cmp.add_argument("--venv-dir", default=None, metavar="DIR",
                     help="where venvs live (default: $XDG_CACHE_HOME or ~/.cache, /torch-upgrade-check/venvs)")
    cmp.add_argument("--max-latency-regression", default=None, metavar="PCT",
                     help="slowdown that fails when significant: 10%% or 0.10 (default: the config's, else 10%%)")
    cmp.add_argument("--max-memory-regression", default=None, metavar="PCT",
                     help="peak-memory growth that fails (default: the config's, else 20%%)")
    _add_run_args(cmp)

    rep = sub.add_parser("report", help="re-render junit.xml and summary.md from a report.json")
    rep.add_argument("report", help="path of report.json")
    rep.add_argument("--junit", default=None, metavar="PATH", help="where to write JUnit XML")
    rep.add_argument("--summary", default=None, metavar="PATH", help="where to write the Markdown summary")

    init = sub.add_parser("init", help="write a starter config and a caller workflow into a repository")
    init.add_argument("--dir", default=".", metavar="DIR", help="repository root (default: .)")

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
        if args.command == "compare":
            from torch_upgrade_check.compare_cmd import cmd_compare

            return cmd_compare(args, argv)
        if args.command == "report":
            return cmd_report(args)
        if args.command == "init":
            from torch_upgrade_check import scaffold

            for path in scaffold.init(Path(args.dir)):
                say(f"wrote {path}")
            return EXIT_PASSED
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


def parse_workloads(items: Sequence[str]) -> list[suite.Workload]:
    """`NAME=module:function` -> user workloads, run through every model aspect (and cross-version) in float32."""
    workloads, problems = [], []
    for item in items:
        name, _, factory = item.partition("=")
        module, colon, function = factory.partition(":")
        if not name.strip() or not colon or not module.strip() or not function.strip():
            problems.append(f"--workload must be NAME=MODULE:FUNCTION, like tiny_gpt=mypkg.models:build, got {item!r}")
        elif name in suite.BUILTIN_NAMES or any(w.name == name for w in workloads):
            problems.append(f"--workload name {name!r} is already taken; choose another name")
        else:
            workloads.append(suite.Workload(name.strip(), ("float32",), (*suite.MODEL_ASPECTS, "cross-version"),
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
    then the per-dtype defaults.
    """
    from torch_upgrade_check import config

    problems: list[str] = []
    for flag in ("rtol", "atol", "timeout"):
        value = getattr(args, flag)
        if value is not None and not (value > 0 and math.isfinite(value)):
            problems.append(f"--{flag} must be a positive number, got {value!r}")
    if args.threads is not None and args.threads < 1:
        problems.append(f"--threads must be 1 or more, got {args.threads}")
    parsed: dict[str, object] = {}
    for name, parse in (("limits", lambda: parse_latency_limits(args.max_latency_ms)),
                        ("workloads", lambda: parse_workloads(args.workload)),
                        ("fail_on", lambda: parse_fail_on(args.fail_on)),
                        ("config", lambda: config.load_config(Path(args.config) if args.config else None,
                                                              explicit=args.config is not None))):
        try:
            parsed[name] = parse()
        except UsageError as e:
            problems += e.problems
    cfg = parsed.get("config")
    extra: list[suite.Workload] = list(parsed.get("workloads", []))  # type: ignore[arg-type]
    if cfg is not None:
        taken = {w.name for w in cfg.workloads}
        problems += [f"--workload name {w.name!r} is already a workload in {cfg.path}; choose another name"
                     for w in extra if w.name in taken]
    if problems:
        raise UsageError(*problems)
    args.fail_on_set = parsed["fail_on"]
    args.config_obj = cfg
    params = {k: v for k, v in (("rtol", args.rtol), ("atol", args.atol)) if v is not None}
    python_path = [str(Path(p).resolve()) for p in args.python_path]
    if cfg is None:
        workloads = [*suite.BUILTIN, *extra]
        by_workload: dict[str, dict[str, object]] = {}
    else:
        workloads = [*cfg.workloads_for_suite(cross_version=cross_version), *extra]
        by_workload = {w.name: cfg.tolerances_for(w.name, rtol=args.rtol, atol=args.atol) for w in workloads}
        python_path = [*cfg.resolved_python_path(), *python_path]
    return session.Settings(
        out=Path(args.out), requested_device=args.device, only=tuple(args.only), workloads=tuple(workloads),
        timeout_s=args.timeout, threads=args.threads, python_path=tuple(python_path),
        max_latency_ms=parsed["limits"], params=params, params_by_workload=by_workload,  # type: ignore[arg-type]
        command=(PROG, *argv), pytest_args=cfg.pytest.args if cfg is not None and cfg.pytest else None,
        config_root=cfg.root if cfg is not None else None,
    )


def with_device_limits(settings: session.Settings, args: argparse.Namespace, device: str) -> session.Settings:
    """Latency limits depend on the device: the config's for this device, then --max-latency-ms."""
    cfg = getattr(args, "config_obj", None)
    if cfg is None:
        return settings
    return replace(settings, max_latency_ms={**cfg.latency_limits(device), **settings.max_latency_ms})


def repro_command(args: argparse.Namespace, head: Sequence[str], device: str, spec: CheckSpec) -> str:
    """A command that runs this one check again: `head` (the subcommand and its interpreters), then the
    device, the check and the flags that shaped it."""
    cmd = [PROG, *head, "--device", device, "--only", spec.id]
    for item in args.workload:
        if item.partition("=")[0] == spec.workload:
            cmd += ["--workload", item]
    cmd += [x for p in args.python_path for x in ("--python-path", p)]
    cmd += ["--config", args.config] if args.config else []
    cmd += [x for flag in ("rtol", "atol") if getattr(args, flag) is not None for x in (f"--{flag}", str(getattr(args, flag)))]
    return shlex.join(cmd)


def say(text: str) -> None:
    print(text, flush=True)


def cmd_run(args: argparse.Namespace, argv: Sequence[str]) -> int:
    settings = settings_from_args(args, argv)
    out = settings.out
    report = session.new_report(settings)
    try:
        python = session.resolve_python(args.python)
        shutil.rmtree(out / "logs", ignore_errors=True)
        probe = session.probe(python, settings)
    except InfrastructureError as e:
        return infra(args, [report], out, str(e))
    device = session.resolve_device(args.device, probe.probes)
    settings = with_device_limits(settings, args, device)
    specs = session.plan(settings, device, aspects=[a for a in ASPECTS if a != "cross-version"])
    session.require_checks(specs, settings)
    if args.list:
        for s in specs:
            print(s.id)
        return EXIT_PASSED
    env = session.environment(probe)
    report = replace(report, device=device, label=env.get("torch_version", "?"), environment=env)
    say(f"{PROG} {__version__}: torch {report.label} on {device} ({env.get('cpu', '')}, "
        f"{env.get('threads')} threads), {len(specs)} checks -> {out}/")
    started = time.monotonic()
    final = session.execute(
        python, specs, settings, report, probes=probe.probes,
        repro=lambda s: repro_command(args, ["run", "--python", python], device, s),
        on_update=lambda r: write_reports([r], out / "report.json"),
        progress=session.Progress(len(specs), say),
    )
    if final.infra_error:
        return infra(args, [final], out, final.infra_error)
    final = replace(final, finished=session.now(), complete=True)
    write_reports([final], out / "report.json")
    return finish(args, [final], out, out / "report.json", time.monotonic() - started)


def infra(args: argparse.Namespace, reports: list[Report], out: Path, message: str) -> int:
    reports = [replace(r, infra_error=r.infra_error or message, finished=session.now()) for r in reports]
    write_reports(reports, out / "report.json")
    print(f"{PROG}: infrastructure error: {message}", file=sys.stderr)
    publish(args, reports, out, out / "report.json")
    return EXIT_INFRA


def publish(args: argparse.Namespace, reports: list[Report], out: Path, report_path: Path | None) -> dict[str, str]:
    from torch_upgrade_check import github

    return github.publish(reports, out, environ=os.environ, report_path=report_path,
                          job_summary=not getattr(args, "no_job_summary", False))


def exit_code(reports: Sequence[Report], fail_on: frozenset[str]) -> int:
    """0/1 by --fail-on: correctness = every failing check but latency and memory (crashes and not-run too)."""
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
                kinds.add(res.aspect if res.aspect in ("latency", "memory") and res.outcome is Outcome.FAILED
                          else "correctness")
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


def cmd_report(args: argparse.Namespace) -> int:
    from torch_upgrade_check import github

    reports = read_reports(Path(args.report))
    github.publish(reports, Path(args.report).parent, environ=os.environ, report_path=Path(args.report),
                   junit_path=Path(args.junit) if args.junit else None,
                   summary_path=Path(args.summary) if args.summary else None)
    return exit_code(reports, frozenset(FAIL_ON))


def cmd_merge(args: argparse.Namespace) -> int:
    reports = [r for p in args.reports for r in read_reports(Path(p))]
    return finish(args, reports, Path(args.out), None, 0.0)
