"""The `compare` command: provision baseline and candidate, run both, measure A/B, write one report."""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

from torch_upgrade_check import __version__, costs, stack, stack_cmd, values
from torch_upgrade_check.analysis import abjudge
from torch_upgrade_check.analysis.sides import decide_side, judge_against_baseline, mark_preexisting
from torch_upgrade_check.aspects import AB_ASPECTS, PER_SIDE_ASPECTS
from torch_upgrade_check.commands import (
    PROG,
    finish,
    fleet_flags,
    fleet_memory,
    fleet_result,
    infra,
    repro_command,
    say,
    settings_from_args,
    team_input,
    with_device_limits,
)
from torch_upgrade_check.errors import EXIT_PASSED, UsageError
from torch_upgrade_check.hostchecks import apiscan
from torch_upgrade_check.model import CheckResult, CheckSpec, Outcome, Report
from torch_upgrade_check.orchestrate import (
    attribute,
    compare,
    device_choice,
    measure,
    optiming,
    provision,
    session,
    store,
)
from torch_upgrade_check.orchestrate.live import LiveWorker
from torch_upgrade_check.orchestrate.workers import InfrastructureError
from torch_upgrade_check.schema import write_reports

T = TypeVar("T")


def _validate(args: argparse.Namespace) -> tuple[provision.TorchSpec | None, provision.TorchSpec | None, compare.Thresholds]:
    problems: list[str] = []
    # each side's stack read at its own ref, and --baseline/--candidate auto replaced by the torch each one pins
    values.collect(problems, stack_cmd.plan_stacks, args)
    values.collect(problems, apiscan.check_roots, getattr(args, "scan", []))
    specs: list[provision.TorchSpec | None] = []
    for role in ("candidate", "baseline"):
        text, python = getattr(args, role), getattr(args, f"{role}_python")
        if text and python:
            problems.append(f"give --{role} or --{role}-python, not both")
        if role == "candidate" and not text and not python:
            problems.append("compare needs --candidate SPEC (like 2.13.0, nightly, test, current) or --candidate-python PATH")
        try:
            specs.append(provision.parse_spec(text, f"--{role}") if text and text != "auto" else None)
        except UsageError as e:
            problems += e.problems
            specs.append(None)
    thresholds = compare.Thresholds()
    try:
        provision.check_backend(args.torch_backend)
    except UsageError as e:
        problems += e.problems
    ratios: dict[str, float | None] = {}
    cfg = getattr(args, "config_obj", None)
    for flag, default in (("max_latency_regression", 0.10), ("max_memory_regression", 0.20),
                          ("max_compile_time_regression", 0.25)):
        given = getattr(args, flag)
        if given is None:
            from_config = getattr(cfg.thresholds, flag) if cfg is not None else None
            ratios[flag] = from_config if from_config is not None else default
            continue
        ratios[flag] = values.collect(problems, values.percent, given, "--" + flag.replace("_", "-"))
    if args.ab_budget is not None:
        args.ab_budget_s = values.collect(problems, values.timeout, args.ab_budget, "--ab-budget")
    elif cfg is not None and cfg.ab_budget is not None:
        args.ab_budget_s = cfg.ab_budget
    given_undecided = getattr(args, "undecided", None)
    args.undecided_policy = (given_undecided or (cfg.undecided if cfg is not None else None)
                             or abjudge.UNDECIDED[0])
    given_cap = getattr(args, "venv_cap", None)
    args.venv_cap_gb = (store.DEFAULT_CAP_GB if given_cap is None
                        else values.collect(problems, values.gigabytes, given_cap, "--venv-cap"))
    if not hasattr(args, "stacks"):  # plan_stacks failed: its problems are listed; nothing below reads a stack
        args.stacks = {role: stack.Stack() for role in stack_cmd.ROLES}
        args.stack = stack.Stack()
    if problems:
        raise UsageError(*problems)
    thresholds = compare.Thresholds(ratios["max_latency_regression"], ratios["max_memory_regression"],
                                    ratios["max_compile_time_regression"])
    return specs[0], specs[1], thresholds


def in_parallel(jobs: dict[str, Callable[[], T]]) -> dict[str, T]:
    """Run each job in a thread of its own and return their results; the first exception is raised here.

    Joined with a timeout so that Ctrl-C still reaches this thread (the workers die with their parent).
    """
    results: dict[str, T] = {}
    errors: list[BaseException] = []

    def run(name: str, job: Callable[[], T]) -> None:
        try:
            results[name] = job()
        except BaseException as e:  # re-raised in the caller's thread
            errors.append(e)

    threads = [threading.Thread(target=run, args=item, daemon=True) for item in jobs.items()]
    for t in threads:
        t.start()
    for t in threads:
        while t.is_alive():
            t.join(0.2)
    if errors:
        raise errors[0]
    return {name: results[name] for name in jobs}


def _same_threads(probes: dict[str, session.WorkerSession]) -> str:
    """An infrastructure problem when the two sides would not run with the same CPU threads, else ""."""
    seen = {role: p.environment.get("threads") for role, p in probes.items()}
    if len(set(seen.values())) > 1:
        return (f"baseline and candidate would run with different CPU thread counts ({seen['baseline']} vs "
                f"{seen['candidate']}); set --threads N so both measure alike")
    return ""


def pythons_for(sides: dict[str, tuple[provision.TorchSpec | None, str | None]], args: argparse.Namespace,
                base_python: str, out: Path) -> dict[str, str]:
    """Each side's interpreter: a prepared one as given, `current` the tool's --python, any other SPEC from the
    venv store, reused or installed, both sides in parallel inside one foldable group of the job's log, then
    one line a side saying how (installed in N s, or reused)."""
    given = {role: session.resolve_python(prepared) for role, (_, prepared) in sides.items() if prepared}  # fail fast
    installs = {role: spec for role, (spec, prepared) in sides.items()
                if spec is not None and not prepared and spec.kind != "current"}
    ready: dict[str, provision.Prepared] = {}
    if installs:
        from torch_upgrade_check import github

        venv_dir = Path(args.venv_dir) if args.venv_dir else store.default_venv_dir()
        opts = provision.Options(
            base_python=base_python, root=store.store_root(venv_dir, os.environ), backend=args.torch_backend,
            index_url=args.index_url, extra_index_urls=tuple(args.extra_index_url), find_links=tuple(args.find_links),
            extra_requirements=(*args.extra_requirement, *getattr(args, "stack", stack.Stack()).requirements),
            installer=provision.choose_installer(args.installer), logs=out / "logs",
        )
        stacks = getattr(args, "stacks", None) or {}  # each side's own stack, read at its git ref
        own = {role: (*args.extra_requirement, *stacks[role].requirements) for role in installs if role in stacks}
        title = "torch-upgrade-check: preparing " + " and ".join(f"{role} torch {spec.text}" for role, spec in installs.items())
        with github.group(title, environ=os.environ):
            if store.untrusted(os.environ):
                say(f"a pull request's run: its venvs live in {opts.root}, apart from those trusted runs reuse")
            ready = provision.ensure_envs(installs, opts, say=say, requirements=own)
        for role, prepared in ready.items():
            say(f"{role}: {prepared.outcome()}")
        provision.trim(opts.root, args.venv_cap_gb, say=say)
    return {role: given[role] if role in given else ready[role].python if role in ready else base_python
            for role in sides}


def compare_head(args: argparse.Namespace) -> list[str]:
    """`compare` with both torches as the user gave them: SPECs with the flags that built their venvs, or
    prepared interpreters. Paths are kept as typed, so the command works wherever the original did."""
    head = ["compare"]
    for role in ("baseline", "candidate"):
        prepared, spec = getattr(args, f"{role}_python"), getattr(args, role)
        head += [f"--{role}-python", prepared] if prepared else [f"--{role}", spec] if spec else []
    if not (args.baseline or args.candidate):
        return head  # no venv is built: the install flags changed nothing
    if args.python != sys.executable:  # builds the venvs, and is the torch of SPEC 'current'
        head += ["--python", args.python]
    for flag, default in (("torch_backend", "auto"), ("installer", "auto"), ("index_url", ""), ("venv_dir", None)):
        if getattr(args, flag) != default:
            head += ["--" + flag.replace("_", "-"), getattr(args, flag)]
    for flag in ("extra_index_url", "find_links", "extra_requirement", "requirements", "extras"):
        head += [x for item in getattr(args, flag) for x in ("--" + flag.replace("_", "-"), item)]
    return head


def repro(args: argparse.Namespace, device: str, spec: CheckSpec) -> str:
    """The `compare` command that runs this one check again, with both torches (a cross-version check needs both)."""
    return repro_command(args, compare_head(args), device, spec)


def cmd_compare(args: argparse.Namespace, argv: Sequence[str]) -> int:
    settings = settings_from_args(args, argv, cross_version=True)
    cand_spec, base_spec, thresholds = _validate(args)
    has_baseline = bool(base_spec or args.baseline_python)
    if has_baseline and settings.threads is None:
        settings = replace(settings, threads=measure.default_threads())
    out = settings.out
    if not args.list:
        for note in stack_cmd.stack_notes(args, args.stacks):
            say(note)
    shutil.rmtree(out / "logs", ignore_errors=True)
    shutil.rmtree(out / "baseline-outputs", ignore_errors=True)  # a candidate must never compare with an earlier run's
    reports = {"candidate": session.new_report(settings, role="candidate" if has_baseline else "")}
    if has_baseline:
        reports = {"baseline": session.new_report(settings, role="baseline"), **reports}
    budget_s = getattr(args, "ab_budget_s", None) or measure.DEFAULT_BUDGET_S
    reports = {k: replace(r, thresholds={**r.thresholds, "max_latency_regression": thresholds.latency,
                                          "max_memory_regression": thresholds.memory,
                                          "max_compile_time_regression": thresholds.compile_time, "threads": settings.threads,
                                          "ab_budget_s": budget_s,
                                          "undecided": getattr(args, "undecided_policy", abjudge.UNDECIDED[0])})
               for k, r in reports.items()}
    started = time.monotonic()
    pythons: dict[str, str] = {}
    try:
        tool_python = session.resolve_python(args.python)
        sides = {role: (spec, prepared) for role, spec, prepared in (
            ("baseline", base_spec, args.baseline_python), ("candidate", cand_spec, args.candidate_python))
            if role in reports}
        if not args.list:  # the team's stack resolved with each side's torch before anything is installed
            reports, stop, blocked = stack_cmd.resolve_first(args, settings.only, sides, tool_python, out, reports,
                                                             repro=lambda device, spec: repro(args, device, spec), say=say)
            if blocked is not None:  # a side's own stack cannot be installed: the team's files, or the runner's network
                if blocked.runner:
                    return infra(args, list(reports.values()), out, blocked.message)
                return team_input(args, list(reports.values()), out, blocked.message)
            if stop:
                write_reports(list(reports.values()), out / "report.json")
                return finish(args, list(reports.values()), out, out / "report.json", time.monotonic() - started)
        pythons = pythons_for(sides, args, tool_python, out)
        probes = in_parallel({role: (lambda python=python, role=role: session.probe(python, settings, name=f"probe-{role}"))
                              for role, python in pythons.items()})
    except InfrastructureError as e:
        return infra(args, list(reports.values()), out, str(e))
    if has_baseline and _same_threads(probes):
        return infra(args, list(reports.values()), out, _same_threads(probes))
    choice = device_choice.choose(args.device, {role: p.probes for role, p in probes.items()},
                                  device_choice.host_accelerator(),
                                  label=probes["candidate"].environment.get("torch_version", ""))
    device = choice.device
    settings = with_device_limits(settings, args, device)
    for role in reports:
        env = {**session.environment(probes[role]), "device_choice": choice.record(args.device)}
        reports[role] = replace(reports[role], device=device, label=env.get("torch_version", "?"), environment=env)
    lost = choice.result(shlex.join([PROG, *compare_head(args), "--device", choice.expected]))
    served = fleet_result(args, reports["candidate"].environment, device,
                          shlex.join([PROG, *compare_head(args), *fleet_flags(args)]))
    reports["candidate"] = replace(reports["candidate"], results=(  # after the stack's resolve result, if any
        *reports["candidate"].results, *(r for r in (lost, served) if r is not None)))
    corr, last = compare.correctness_specs(settings, device), compare.warnings_specs(settings, device)
    ab_specs = session.plan(settings, device, aspects=list(AB_ASPECTS))
    saved_dir = out / "baseline-outputs"  # emptied above
    op_specs = compare.op_latency_specs(settings, device, saved_dir) if has_baseline else []
    side_specs: dict[str, list[CheckSpec]] = {"candidate": list(corr)}
    if has_baseline:
        side_specs = {"baseline": [*compare.cross_version_specs(settings, device, saved_dir, "save"),
                                   *compare.saved_specs(settings, device, saved_dir, "save"), *corr, *last],
                      "candidate": [*corr, *compare.cross_version_specs(settings, device, saved_dir, "compare"),
                                    *compare.saved_specs(settings, device, saved_dir, "compare"), *last]}
    else:  # the candidate alone, as `run` plans it
        side_specs["candidate"] += [*session.plan(settings, device, aspects=list(PER_SIDE_ASPECTS)), *last,
                                    *ab_specs]
    planned = [*side_specs["candidate"], *(ab_specs if has_baseline else []), *op_specs]
    stack_ids = stack_cmd.planned_ids(args, settings.only)
    if not stack_ids:
        session.require_checks(planned, settings, reports["candidate"].results)
    if args.list:
        print("\n".join(costs.listing([*((s.id, s.aspect) for s in planned),
                                        *((check, check.rpartition("/")[2]) for check in stack_ids)], compare=True)))
        return EXIT_PASSED
    say(f"{PROG} {__version__}: " + " vs ".join(f"{role} torch {r.label}" for role, r in reports.items())
        + f" on {device}; results -> {out}/")
    for r in reports["candidate"].results:
        say(f"{PROG}: {r.outcome.value.upper()} {r.id}: {r.reason}")
    if choice.note:
        say(f"{PROG}: {choice.note}")
    reports = stack_cmd.installed_stage(args, settings.only, pythons, reports, device, timeout_s=settings.timeout_s,
                                        repro=lambda s: repro(args, device, s), say=say)

    lock = threading.Lock()

    def write() -> None:
        with lock:
            write_reports(list(reports.values()), out / "report.json")

    def side(role: str, specs: list[CheckSpec], phase_settings: session.Settings, prefix: str,
             also: Callable[[Report], None] = lambda r: None) -> Report:
        def update(r: Report) -> None:
            reports[role] = r
            write()
            also(r)

        return session.execute(
            pythons[role], specs, phase_settings, reports[role], probes=probes[role].probes,
            repro=lambda s: repro(args, device, s), on_update=update,
            progress=session.Progress(len(specs), say, tag=role if has_baseline else ""), log_prefix=prefix,
            decide_fn=lambda s, o, rep: decide_side(s, o, rep, settings.max_latency_ms),
        )

    # Correctness times nothing, so the two sides run at once. The baseline saves its outputs first, then
    # marks them complete; the candidate's worker, its own checks done, waits for that mark before its
    # cross-version checks compare with them.
    done_saving = compare.saved_mark(saved_dir)
    save_ids = {s.id for s in side_specs.get("baseline", []) if s.params.get("mode") == "save"}

    def mark_saved() -> None:
        done_saving.parent.mkdir(parents=True, exist_ok=True)
        done_saving.touch()

    def baseline_side() -> Report:
        def on_update(r: Report) -> None:
            if not any(x.id in save_ids and x.outcome is Outcome.NOT_RUN for x in r.results):
                mark_saved()

        try:
            return side("baseline", side_specs["baseline"], settings, "worker-baseline", on_update)
        finally:
            mark_saved()  # also when it failed: the candidate's worker must not wait for ever

    phase_one = {"candidate": lambda: side("candidate", side_specs["candidate"], settings, "worker-candidate")}
    if has_baseline:
        phase_one = {"baseline": baseline_side, **phase_one}
    pair = None
    if has_baseline and (ab_specs or op_specs):
        warm = ("memory",) if device == "cpu" and any(s.aspect == "memory" for s in ab_specs) else ()
        pair = measure.Pair(pythons["baseline"], pythons["candidate"], out / "logs", settings.threads,
                            tuple(settings.python_path), measure.pinned_cpus(settings.threads or 1), warm,
                            Path(tempfile.mkdtemp(prefix="torch-upgrade-check-inductor-")))
    # The A/B pair starts as soon as one side is done (a CPU is free): it imports torch and readies its
    # profiler while the other side finishes; it measures nothing until both are done.
    launched: list[tuple[LiveWorker, LiveWorker]] = []
    launching = threading.Lock()

    def then_launch(job: Callable[[], Report]) -> Callable[[], Report]:
        def run() -> Report:
            try:
                return job()
            finally:
                with launching:
                    if pair is not None and not launched:
                        try:
                            launched.append(pair.launch(1))
                        except OSError:  # the A/B batch starts its pair itself, and reports what fails then
                            pass
        return run

    try:
        reports.update(in_parallel({role: then_launch(job) for role, job in phase_one.items()}))
        for r in reports.values():
            if r.infra_error:
                return infra(args, list(reports.values()), out, r.infra_error)
        if pair is not None:
            record = _recorder(args, device, [*ab_specs, *op_specs], reports, write)
            if ab_specs:
                _measure(settings, ab_specs, pair, launched.pop() if launched else None, thresholds, budget_s, record,
                         getattr(args, "undecided_policy", "fail"), attributing=not getattr(args, "no_attribution", False))
            if op_specs:  # after the A/B: its pairs too are timed alone
                optiming.measure(op_specs, pair, timeout_s=settings.timeout_s, say=say,
                                 launched=launched.pop() if launched else None,
                                 on_result=lambda base, cand: _said(record(base, cand)))
    finally:
        if launched:
            measure.close(*launched.pop())
        if pair is not None and pair.cache_dir is not None:
            shutil.rmtree(pair.cache_dir, ignore_errors=True)
    if has_baseline:
        reports["candidate"] = judge_against_baseline(
            reports["baseline"], mark_preexisting(reports["baseline"], reports["candidate"]),
            getattr(args, "fail_on_set", frozenset()))
    reports["candidate"] = fleet_memory(args, reports["candidate"], shlex.join(
        [PROG, *compare_head(args), "--device", device, *fleet_flags(args, "memory")]))
    reports = {k: replace(r, finished=session.now(), complete=True) for k, r in reports.items()}
    write()
    return finish(args, list(reports.values()), out, out / "report.json", time.monotonic() - started)


def _measure(settings: session.Settings, ab_specs: list[CheckSpec], pair: measure.Pair,
             launched: tuple[LiveWorker, LiveWorker] | None, thresholds: compare.Thresholds, budget_s: float,
             record: Callable[..., CheckResult | None], policy: str, *, attributing: bool = True) -> None:
    """The latency, memory and compile-time A/B, each result written to both sides' reports as it is decided; then,
    `attributing`, each regressed or undecided latency check's forward profiled op by op (orchestrate.attribute)."""
    kinds = [a for a in AB_ASPECTS if any(s.aspect == a for s in ab_specs)]
    cold = (f", a compile-time check {measure.COMPILE_BUDGET_ROUNDS} of its rounds, {budget_s * measure.COMPILE_BUDGET_FACTOR:g}"
            f"-{budget_s * measure.COMPILE_BUDGET_MOST:g} s" if "compile-time" in kinds else "")
    say(f"{', '.join(kinds)}: {len(ab_specs)} checks A/B, in batches of interleaved rounds, each batch in a fresh "
        f"pair of workers ({settings.threads} CPU threads each; up to {budget_s:g} s a check{cold})")
    finished = [0]
    slower: list[tuple[measure.Track, CheckResult]] = []

    def on_track(track: measure.Track) -> None:
        base, cand = abjudge.results(track, settings.max_latency_ms, policy)
        record(base, cand)
        finished[0] += 1
        say(f"[{finished[0]}/{len(ab_specs)}] A/B {cand.outcome.value.upper():<10} {cand.id:<44} {cand.reason[:140]}")
        if attributing and attribute.wanted(cand):
            slower.append((track, cand))

    measure.measure(ab_specs, pair, thresholds.by_aspect(), timeout_s=settings.timeout_s, budget_s=budget_s, say=say,
                    on_track=on_track, launched=launched)
    # after every A/B check is decided (its own pairs closed): where each slower forward's time went, op by op
    for track, cand in slower:
        say(f"{cand.id}: {cand.metrics.get('change')}; profiling both sides' forward op by op in fresh pairs")
        table = attribute.attribute(track.spec, pair, baseline_ms=float(cand.metrics.get("baseline_median") or 0.0),
                                    candidate_ms=float(cand.metrics.get("candidate_median") or 0.0),
                                    timeout_s=settings.timeout_s, ab_budget_s=budget_s, say=say)
        record(*abjudge.results(track, settings.max_latency_ms, policy, attribution=table))


def _recorder(args: argparse.Namespace, device: str, specs: list[CheckSpec], reports: dict[str, Report],
              write: Callable[[], None]) -> Callable[..., CheckResult | None]:
    """Both reports' results of `specs`, not-run until recorded (a run killed meanwhile shows them so), then as
    `record(baseline_result, candidate_result)` gives them (again, to replace them); returns the candidate's."""
    repro_of = {s.id: repro(args, device, s) for s in specs}
    pending = {role: {s.id: CheckResult(s.workload, s.aspect, s.device, s.dtype, Outcome.NOT_RUN,
                                        reason="not started", repro=repro_of[s.id]) for s in specs}
               for role in ("baseline", "candidate")}
    done = {role: reports[role].results for role in pending}

    def record(base: CheckResult | None = None, cand: CheckResult | None = None) -> CheckResult | None:
        for role, result in (("baseline", base), ("candidate", cand)):
            if result is not None:
                pending[role][result.id] = replace(result, repro=repro_of[result.id])
            reports[role] = replace(reports[role], results=(*done[role], *pending[role].values()))
        write()
        return cand

    record()
    return record


def _said(result: CheckResult | None) -> None:
    if result is not None:
        say(f"{result.outcome.value.upper():<10} {result.id:<44} {result.reason[:160]}")
