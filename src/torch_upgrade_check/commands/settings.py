"""Each command's settings, built once from its parsed flags: the flags as typed, and what they mean, validated (no torch).

A settings field is named as its flag's argparse dest, so one function fills it from the parsed flags and a test
holds every parser's dests to its settings. The flags stay as typed beside their meaning: commands/argv.py turns
settings back into a command line (a repro command, a bisect step) with the user's own words. Every problem of a
stage is reported together, as a UsageError for cli.main.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, TypeVar

from torch_upgrade_check import config, suite, values
from torch_upgrade_check.analysis import abjudge
from torch_upgrade_check.aspects.api import host as apiscan
from torch_upgrade_check.commands import stack_sides
from torch_upgrade_check.commands.common import PROG, Fleet, Output
from torch_upgrade_check.configfile.read import load_config
from torch_upgrade_check.errors import UsageError
from torch_upgrade_check.model import FAIL_ON
from torch_upgrade_check.orchestrate import budget, compare, measure, provision, session, store
from torch_upgrade_check.stack import Stack

DEFAULT_TIMEOUT_S = budget.BASE_S  # the floor of each check's sized timeout

T = TypeVar("T")
S = TypeVar("S")


@dataclass(frozen=True, kw_only=True)
class Shared:
    """The flags run, compare and bisect share, as typed; and --fail-on's kinds."""

    python: str
    device: str
    only: tuple[str, ...]
    out: str
    timeout: str | None  # --timeout, --rtol, --atol and --threads stay text: a repro repeats them as typed
    rtol: str | None
    atol: str | None
    threads: str | None
    max_latency_ms: tuple[str, ...]
    workload: tuple[str, ...]
    python_path: tuple[str, ...]
    config: str | None
    fail_on: str
    compile_time: bool
    ddp: bool
    fleet: str | None
    no_job_summary: bool
    list: bool
    fail_on_set: frozenset[str]

    @property
    def output(self) -> Output:
        return Output(Path(self.out), self.fail_on_set, not self.no_job_summary)


@dataclass(frozen=True, kw_only=True)
class RunSettings(Shared):
    """`run`: the flags, the config file they name, and the worker session's settings they make."""

    scan: tuple[str, ...]
    cfg: config.Config | None
    fleet_given: Fleet | None  # --fleet, parsed
    session: session.Settings  # before the device is known (common.with_device_limits adds its latency limits)

    @property
    def served(self) -> Fleet:
        """The fleet of --fleet, else of the config's fleet: (archs, oldest driver, smallest card's bytes)."""
        cfg = self.cfg
        return self.fleet_given or ((cfg.fleet.archs, cfg.fleet.driver, cfg.fleet.memory)
                                    if cfg and cfg.fleet else ((), "", 0))


@dataclass(frozen=True, kw_only=True)
class Install:
    """compare's and bisect's flags, as typed: where torch comes from, and the A/B thresholds."""

    torch_backend: str
    installer: str
    index_url: str
    extra_index_url: tuple[str, ...]
    find_links: tuple[str, ...]
    extra_requirement: tuple[str, ...]
    requirements: tuple[str, ...]
    extras: tuple[str, ...]
    venv_dir: str | None
    venv_cap: str | None
    max_latency_regression: str | None
    max_memory_regression: str | None
    max_compile_time_regression: str | None
    ab_budget: str | None
    undecided: str | None


@dataclass(frozen=True, kw_only=True)
class CompareSettings(RunSettings, Install):
    """`compare`: run's settings, the install flags, both sides (an `auto` SPEC replaced by the torch its stack pins),
    each side's stack and the A/B thresholds."""

    candidate: str | None
    baseline: str | None
    base_ref: str | None
    head_ref: str | None
    candidate_python: str | None
    baseline_python: str | None
    no_attribution: bool
    fail_on_shared_failures: bool  # --[no-]fail-on-shared-failures, else the config's, else False
    candidate_spec: provision.TorchSpec | None
    baseline_spec: provision.TorchSpec | None
    thresholds: compare.Thresholds
    ab_budget_s: float  # --ab-budget, else the config's, else measure's default
    undecided_policy: str
    venv_cap_gb: float
    stacks: Mapping[str, Stack]  # role -> the stack read at that side's ref
    auto: tuple[str, ...] = ()  # the roles given as `auto`: their SPEC is the torch their stack's files pin

    @property
    def stack(self) -> Stack:
        """The candidate's stack: what --list and the installed checks ask of it."""
        return self.stacks["candidate"]

    @property
    def has_baseline(self) -> bool:
        return bool(self.baseline_spec or self.baseline_python)

    @property
    def refs(self) -> dict[str, str | None]:
        return {"baseline": self.base_ref, "candidate": self.head_ref}


@dataclass(frozen=True, kw_only=True)
class BisectSettings(Shared, Install):
    """`bisect`: the builds, and the flags it hands on to each step's compare as typed (they are validated there)."""

    good: str | None
    bad: str | None
    builds: str | None


@dataclass(frozen=True)
class ReportSettings:
    report: str
    junit: str | None
    summary: str | None


@dataclass(frozen=True)
class InitSettings:
    dir: str
    canary: bool = False


@dataclass(frozen=True, kw_only=True)
class MergeSettings:
    reports: tuple[str, ...]
    runner_status: tuple[str, ...]
    runners: str | None
    fail_on: str
    out: str
    fail_on_set: frozenset[str]

    @property
    def output(self) -> Output:
        return Output(Path(self.out), self.fail_on_set)


@dataclass(frozen=True)
class HistorySettings:
    """`history` (read a store, append a record, write the summary, charts, page and alarm) or `history publish`."""

    action: str | None
    store: str | None
    append: str | None
    commit: str | None
    markdown: str | None
    charts: str | None
    html: str | None
    json: str | None
    alarm_output: str | None
    store_branch: str | None  # publish's (history/publish.py)
    record_from: str | None
    remote: str
    attempts: str | None  # publish's own parse (history/publish.py): 1 to 50, default 5
    bisect_report: str | None


SETTINGS: dict[str, type] = {"run": RunSettings, "compare": CompareSettings, "bisect": BisectSettings,
                             "report": ReportSettings, "init": InitSettings, "merge": MergeSettings,
                             "history": HistorySettings}


def as_typed(cls: type[S], args: argparse.Namespace, **given: Any) -> dict[str, Any]:
    """The fields of `cls` that are flags, as the parser read them (lists as tuples), `given` replacing some."""
    names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    typed = {k: tuple(v) if isinstance(v, list) else v for k, v in vars(args).items() if k in names}
    return {**typed, **given}


def build(args: argparse.Namespace, argv: Sequence[str]) -> Any:
    """The settings of the parsed command `args.command`, validated."""
    if args.command == "run":
        return RunSettings(**as_typed(RunSettings, args, **_run(args, argv)))
    if args.command == "compare":
        return _compare(args, argv)
    if args.command == "bisect":
        return _bisect(args)
    if args.command == "merge":
        if not (args.reports or args.runner_status or args.runners):
            raise UsageError("merge needs report.json files (or --runner-status FILE / --runners JSON); got none")
        return MergeSettings(**as_typed(MergeSettings, args, fail_on_set=parse_fail_on(args.fail_on)))
    cls = SETTINGS[args.command]
    return cls(**as_typed(cls, args))


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


def _run(args: argparse.Namespace, argv: Sequence[str], *, cross_version: bool = False) -> dict[str, Any]:
    """Validate every flag `run` and `compare` share, and the config file; all problems reported together.

    Precedence: command-line flags, then the config's per-workload values, then its thresholds,
    then the per-dtype defaults. The flags stay text beside these (the repro command repeats them as typed).
    """
    problems: list[str] = []

    def flag(parse: Callable[[object, str], T], given: str | None, name: str) -> T | None:
        return None if given is None else values.collect(problems, parse, given, f"--{name}")

    rtol, atol = flag(values.tolerance, args.rtol, "rtol"), flag(values.tolerance, args.atol, "atol")
    timeout_s, threads = flag(values.timeout, args.timeout, "timeout"), flag(values.threads, args.threads, "threads")
    limits = values.collect(problems, parse_latency_limits, args.max_latency_ms)
    extra = values.collect(problems, parse_workloads, args.workload) or []
    fail_on = values.collect(problems, parse_fail_on, args.fail_on)
    fleet_given = None
    if args.fleet is not None:
        from torch_upgrade_check.analysis.fleet import parse_fleet

        fleet_given = values.collect(problems, parse_fleet, args.fleet, "--fleet")
    cfg = values.collect(problems, load_config, Path(args.config) if args.config else None,
                         explicit=args.config is not None)
    if cfg is not None:
        taken = {w.name for w in cfg.workloads}
        problems += [f"--workload name {w.name!r} is already a workload in {cfg.path}; choose another name"
                     for w in extra if w.name in taken]
    if problems:
        raise UsageError(*problems)
    if threads is None and cfg is not None:
        threads = cfg.threads  # config key `threads:`; --threads overrides it
    if timeout_s is None and cfg is not None:
        timeout_s = cfg.check_timeout_seconds  # config key `check-timeout-seconds:`; --timeout overrides it
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
    if args.compile_time:
        workloads = [suite.with_compile_time(w) for w in workloads]
    if args.ddp:
        workloads = [suite.with_ddp(w) for w in workloads]
    worker = session.Settings(
        out=Path(args.out), requested_device=args.device, only=tuple(args.only), workloads=tuple(workloads),
        timeout_s=DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s, size_timeouts=timeout_s is None,
        threads=threads,
        python_path=tuple(python_path), max_latency_ms=limits or {}, params=params,
        params_by_workload=by_workload, command=(PROG, *argv),
        pytest_args=cfg.pytest.args if cfg is not None and cfg.pytest else None,
        config_root=cfg.root if cfg is not None else None,
    )
    return {"fail_on_set": fail_on, "cfg": cfg, "fleet_given": fleet_given, "session": worker}


def _compare(args: argparse.Namespace, argv: Sequence[str]) -> CompareSettings:
    """run's validation (its problems first), then compare's own: each side's stack read at its own ref and an `auto`
    SPEC replaced by the torch that side pins, both SPECs, the backend and the A/B thresholds."""
    run = _run(args, argv, cross_version=True)
    cfg: config.Config | None = run["cfg"]
    problems: list[str] = []
    asked = stack_sides.Asked(cfg, tuple(args.requirements), tuple(args.extras),
                               {"baseline": args.base_ref, "candidate": args.head_ref})
    given = {"baseline": args.baseline, "candidate": args.candidate}
    planned = values.collect(problems, stack_sides.plan_stacks, asked, given)
    stacks, pinned = planned if planned is not None else ({role: Stack() for role in stack_sides.ROLES}, given)
    values.collect(problems, apiscan.check_roots, args.scan)
    prepared = {"baseline": args.baseline_python, "candidate": args.candidate_python}
    specs: dict[str, provision.TorchSpec | None] = {}
    for role in ("candidate", "baseline"):
        text, python = pinned[role], prepared[role]
        if text and python:
            problems.append(f"give --{role} or --{role}-python, not both")
        if role == "candidate" and not text and not python:
            problems.append("compare needs --candidate SPEC (like 2.13.0, nightly, test, latest, current) or "
                            "--candidate-python PATH")
        specs[role] = values.collect(problems, provision.parse_spec, text, f"--{role}") if text and text != "auto" else None
    values.collect(problems, provision.check_backend, args.torch_backend)
    ratios: dict[str, float | None] = {}
    for name, typed, default in (("max_latency_regression", args.max_latency_regression, 0.10),
                                 ("max_memory_regression", args.max_memory_regression, 0.20),
                                 ("max_compile_time_regression", args.max_compile_time_regression, 0.25)):
        if typed is None:
            from_config = getattr(cfg.thresholds, name) if cfg is not None else None
            ratios[name] = from_config if from_config is not None else default
        else:
            ratios[name] = values.collect(problems, values.percent, typed, "--" + name.replace("_", "-"))
    ab_budget_s = (values.collect(problems, values.timeout, args.ab_budget, "--ab-budget") if args.ab_budget is not None
                   else cfg.ab_budget if cfg is not None else None)
    venv_cap_gb = (store.DEFAULT_CAP_GB if args.venv_cap is None
                   else values.collect(problems, values.gigabytes, args.venv_cap, "--venv-cap"))
    if problems:
        raise UsageError(*problems)
    undecided = args.undecided or (cfg.undecided if cfg is not None else None) or abjudge.UNDECIDED[0]
    shared = args.fail_on_shared_failures
    if shared is None:
        shared = bool(cfg.fail_on_shared_failures) if cfg is not None else False
    worker = run["session"]
    if (specs["baseline"] or args.baseline_python) and worker.threads is None:
        worker = replace(worker, threads=measure.default_threads())  # both sides measure with the same threads
    return CompareSettings(**as_typed(
        CompareSettings, args, **{**run, "session": worker}, baseline=pinned["baseline"], candidate=pinned["candidate"],
        candidate_spec=specs["candidate"], baseline_spec=specs["baseline"],
        thresholds=compare.Thresholds(ratios["max_latency_regression"], ratios["max_memory_regression"],
                                      ratios["max_compile_time_regression"]),
        ab_budget_s=ab_budget_s or measure.DEFAULT_BUDGET_S, undecided_policy=undecided, venv_cap_gb=venv_cap_gb,
        stacks=stacks, fail_on_shared_failures=shared,
        auto=tuple(role for role in stack_sides.ROLES if given[role] == "auto")))


def _bisect(args: argparse.Namespace) -> BisectSettings:
    if args.list:
        raise UsageError("--list is not for bisect; run compare --list with the same --only to see the checks")
    if args.fleet is not None:
        raise UsageError("--fleet is not for bisect (a build either serves the fleet or not); run compare "
                         "--fleet with the candidate build")
    fail_on = parse_fail_on(args.fail_on)
    if not args.only:
        raise UsageError("bisect needs --only GLOB: the checks that fail on the bad build (their ids are in "
                         "compare's summary), so that each step runs only them")
    return BisectSettings(**as_typed(BisectSettings, args, fail_on_set=fail_on))
