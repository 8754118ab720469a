"""The `compare` command, phase by phase: plan sides, provision them, correctness on both, the A/B, judge; one report."""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypeVar

from torch_upgrade_check import __version__, stack
from torch_upgrade_check.analysis import abjudge
from torch_upgrade_check.analysis.sides import decide_side, judge_against_baseline, mark_preexisting
from torch_upgrade_check.aspects import AB_ASPECTS, PER_SIDE_ASPECTS
from torch_upgrade_check.commands import argv, stack_checks, stack_sides
from torch_upgrade_check.commands.common import (
    PROG,
    finish,
    fleet_memory,
    fleet_result,
    infra,
    say,
    team_input,
    with_device_limits,
)
from torch_upgrade_check.commands.settings import CompareSettings, Install
from torch_upgrade_check.errors import EXIT_PASSED
from torch_upgrade_check.hostchecks import pytest_passthrough
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
from torch_upgrade_check.orchestrate.budget import slowest
from torch_upgrade_check.orchestrate.live import LiveWorker
from torch_upgrade_check.orchestrate.workers import InfrastructureError
from torch_upgrade_check.report import costs
from torch_upgrade_check.schema import write_reports

T = TypeVar("T")


def execute(s: CompareSettings) -> int:
    reports = plan_sides(s)
    started = time.monotonic()
    ready = provision_sides(s, reports, started)
    if isinstance(ready, int):
        return ready
    plan = plan_checks(ready)
    if s.list:
        print("\n".join(costs.listing([*((c.id, c.aspect) for c in plan.planned),
                                        *((check, check.rpartition("/")[2]) for check in plan.stack_ids)], compare=True)))
        return EXIT_PASSED
    say(f"{PROG} {__version__}: " + " vs ".join(f"{role} torch {r.label}" for role, r in ready.reports.items())
        + f" on {ready.device}; results -> {ready.out}/")
    for r in ready.reports["candidate"].results:
        say(f"{PROG}: {r.outcome.value.upper()} {r.id}: {r.reason}")
    if ready.choice.note:
        say(f"{PROG}: {ready.choice.note}")
    ready.reports = stack_checks.installed_stage(s, ready.settings.only, ready.pythons, ready.reports, ready.device,
                                                 timeout_s=ready.settings.timeout_s, repro=ready.repro, say=say)
    pair = ab_pair(ready, plan)
    launched: list[tuple[LiveWorker, LiveWorker]] = []  # the A/B pair started early, while it waits for its turn
    try:
        failed = correctness(ready, plan, pair, launched)
        if failed is not None:
            return failed
        if pair is not None:
            measure_ab(ready, plan, pair, launched)
    finally:
        if launched:
            measure.close(*launched.pop())
        if pair is not None and pair.cache_dir is not None:
            shutil.rmtree(pair.cache_dir, ignore_errors=True)
    return judge(ready, started)


# --- plan sides -----------------------------------------------------------------------------------------------------

def plan_sides(s: CompareSettings) -> dict[str, Report]:
    """An empty report per side (the candidate's alone without a baseline), with the thresholds it is judged by;
    the output folder's logs and saved baseline outputs of an earlier run removed."""
    settings, out = s.session, s.output.out
    if not s.list:
        unchanged = stack_checks.unchanged_torch_note(s)
        for note in [*stack_sides.stack_notes(s.refs, s.stacks), *([unchanged] if unchanged else [])]:
            say(note)
    shutil.rmtree(out / "logs", ignore_errors=True)
    shutil.rmtree(out / "baseline-outputs", ignore_errors=True)  # a candidate must never compare with an earlier run's
    reports = {"candidate": session.new_report(settings, role="candidate" if s.has_baseline else "")}
    if s.has_baseline:
        reports = {"baseline": session.new_report(settings, role="baseline"), **reports}
    thresholds = {"max_latency_regression": s.thresholds.latency, "max_memory_regression": s.thresholds.memory,
                  "max_compile_time_regression": s.thresholds.compile_time, "threads": settings.threads,
                  "ab_budget_s": s.ab_budget_s, "undecided": s.undecided_policy}
    return {k: replace(r, thresholds={**r.thresholds, **thresholds}) for k, r in reports.items()}


# --- provision ------------------------------------------------------------------------------------------------------

@dataclass
class Sides:
    """What every phase after provisioning shares: both sides' interpreters and probes, the device, the worker
    settings for it, and the reports as they grow (each change written at once)."""

    s: CompareSettings
    settings: session.Settings  # with the device's latency limits
    device: str
    choice: device_choice.Choice
    pythons: dict[str, str]
    probes: dict[str, session.WorkerSession]
    reports: dict[str, Report]
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def out(self) -> Path:
        return self.settings.out

    def write(self) -> None:
        with self.lock:
            write_reports(list(self.reports.values()), self.out / "report.json")

    def repro(self, spec: CheckSpec) -> str:
        """The `compare` command that runs this one check again, with both torches (a cross-version check needs both)."""
        return argv.compare_repro(self.s, self.device, spec)

    def side(self, role: str, specs: list[CheckSpec], prefix: str,
             also: Callable[[Report], None] = lambda r: None) -> Report:
        """One side's worker checks, its report written as each result comes."""
        def update(r: Report) -> None:
            self.reports[role] = r
            self.write()
            also(r)

        progress = session.Progress(len(specs), say, tag=role if self.s.has_baseline else "")
        done = session.execute(
            self.pythons[role], specs, self.settings, self.reports[role], probes=self.probes[role].probes,
            repro=self.repro, on_update=update, progress=progress, log_prefix=prefix,
            decide_fn=lambda c, o, rep: decide_side(c, o, rep, self.settings.max_latency_ms),
        )
        return pytest_passthrough.after_checks(done, self.pythons[role], self.settings, log_prefix=prefix,
                                               progress=progress, on_update=update)


def provision_sides(s: CompareSettings, reports: dict[str, Report], started: float) -> Sides | int:
    """Each side's stack resolved with its torch, then its interpreter (prepared, or a venv installed or reused) and
    its probe; the device both use. An exit code instead when the run ends here."""
    settings, output = s.session, s.output
    pythons: dict[str, str] = {}
    sides = {role: (spec, prepared) for role, spec, prepared in (
        ("baseline", s.baseline_spec, s.baseline_python), ("candidate", s.candidate_spec, s.candidate_python))
        if role in reports}
    tool_python = ""
    try:
        tool_python = session.resolve_python(s.python)
        if not s.list:  # the team's stack resolved with each side's torch before anything is installed
            reports, stop, blocked = stack_checks.resolve_first(
                s, settings.only, sides, tool_python, output.out, reports,
                repro=lambda device, spec: argv.compare_repro(s, device, spec), say=say)
            if blocked is not None:  # a side's own stack cannot be installed: the team's files, or the runner's network
                if blocked.runner:
                    return infra(output, list(reports.values()), blocked.message)
                return team_input(output, list(reports.values()), blocked.message)
            if stop:
                write_reports(list(reports.values()), output.out / "report.json")
                return finish(output, list(reports.values()), output.out / "report.json", time.monotonic() - started)
        pythons = pythons_for(sides, s, tool_python, output.out, venv_cap_gb=s.venv_cap_gb, stack=s.stack,
                              stacks=s.stacks)
        probes = in_parallel({role: (lambda python=python, role=role: session.probe(python, settings, name=f"probe-{role}"))
                              for role, python in pythons.items()})
    except InfrastructureError as e:
        # an install that failed because the index has no such torch is the team's input, named (exit 2)
        absent = stack_checks.torch_not_on_index(s, sides, tool_python, output.out) if tool_python and not s.list else None
        if absent:
            return team_input(output, list(reports.values()), absent)
        return infra(output, list(reports.values()), str(e))
    if s.has_baseline and _same_threads(probes):
        return infra(output, list(reports.values()), _same_threads(probes))
    choice = device_choice.choose(s.device, {role: p.probes for role, p in probes.items()},
                                  device_choice.host_accelerator(),
                                  label=probes["candidate"].environment.get("torch_version", ""))
    device = choice.device
    for role in reports:
        env = {**session.environment(probes[role]), "device_choice": choice.record(s.device)}
        reports[role] = replace(reports[role], device=device, label=env.get("torch_version", "?"), environment=env)
    same = stack_checks.nothing_compared(s, {role: r.label for role, r in reports.items()}, "install")
    if same is not None:  # never a PASSED that compared a torch with itself
        return team_input(output, list(reports.values()), same)
    head = argv.compare_head(s)
    lost = choice.result(shlex.join([PROG, *head, "--device", choice.expected]))
    served = fleet_result(s.served, reports["candidate"].environment, device,
                          shlex.join([PROG, *head, *argv.fleet_flags(s)]))
    reports["candidate"] = replace(reports["candidate"], results=(  # after the stack's resolve result, if any
        *reports["candidate"].results, *(r for r in (lost, served) if r is not None)))
    return Sides(s, with_device_limits(settings, s.cfg, device), device, choice, pythons, probes, reports)


def pythons_for(sides: Mapping[str, tuple[provision.TorchSpec | None, str | None]], s: Install, base_python: str,
                out: Path, *, venv_cap_gb: float, stack: stack.Stack,
                stacks: Mapping[str, stack.Stack] | None = None) -> dict[str, str]:
    """Each side's interpreter: a prepared one as given, `current` the tool's --python, any other SPEC from the
    venv store, reused or installed, both sides in parallel inside one foldable group of the job's log, then
    one line a side saying how (installed in N s, or reused). Every venv gets `stack`'s requirements, or, for a
    side in `stacks`, that side's own."""
    given = {role: session.resolve_python(prepared) for role, (_, prepared) in sides.items() if prepared}  # fail fast
    installs = {role: spec for role, (spec, prepared) in sides.items()
                if spec is not None and not prepared and spec.kind != "current"}
    ready: dict[str, provision.Prepared] = {}
    if installs:
        from torch_upgrade_check import github

        venv_dir = Path(s.venv_dir) if s.venv_dir else store.default_venv_dir()
        opts = provision.Options(
            base_python=base_python, root=store.store_root(venv_dir, os.environ), backend=s.torch_backend,
            index_url=s.index_url, extra_index_urls=s.extra_index_url, find_links=s.find_links,
            extra_requirements=(*s.extra_requirement, *stack.requirements),
            installer=provision.choose_installer(s.installer), logs=out / "logs",
        )
        stacks = stacks or {}  # each side's own stack, read at its git ref
        own = {role: (*s.extra_requirement, *stacks[role].requirements) for role in installs if role in stacks}
        title = "torch-upgrade-check: preparing " + " and ".join(f"{role} torch {spec.text}" for role, spec in installs.items())
        with github.group(title, environ=os.environ):
            if store.untrusted(os.environ):
                say(f"a pull request's run: its venvs live in {opts.root}, apart from those trusted runs reuse")
            ready = provision.ensure_envs(installs, opts, say=say, requirements=own)
        for role, prepared in ready.items():
            say(f"{role}: {prepared.outcome()}")
        provision.trim(opts.root, venv_cap_gb, say=say)
    return {role: given[role] if role in given else ready[role].python if role in ready else base_python
            for role in sides}


def in_parallel(jobs: dict[str, Callable[[], T]]) -> dict[str, T]:
    """Run each job in a thread of its own and return their results; the first exception is raised here.

    Joined with a timeout so that Ctrl-C still reaches this thread (the workers die with their parent).
    """
    results: dict[str, T] = {}
    errors: list[BaseException] = []

    def one(name: str, job: Callable[[], T]) -> None:
        try:
            results[name] = job()
        except BaseException as e:  # re-raised in the caller's thread
            errors.append(e)

    threads = [threading.Thread(target=one, args=item, daemon=True) for item in jobs.items()]
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


# --- the checks each phase runs ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Plan:
    """The checks of each phase: each side's worker checks, the A/B checks, the op-latency checks; and, for --list,
    every check planned and the stack checks."""

    side_specs: dict[str, list[CheckSpec]]
    ab_specs: list[CheckSpec]
    op_specs: list[CheckSpec]
    planned: list[CheckSpec]
    stack_ids: list[str]
    saved_dir: Path  # where the baseline saves what the candidate loads


def plan_checks(sides: Sides) -> Plan:
    """The checks of each phase on the device chosen; a UsageError when --only selects none."""
    settings, device, has_baseline = sides.settings, sides.device, sides.s.has_baseline
    corr, last = compare.correctness_specs(settings, device), compare.warnings_specs(settings, device)
    ab_specs = session.plan(settings, device, aspects=list(AB_ASPECTS))
    saved_dir = sides.out / "baseline-outputs"  # emptied by plan_sides
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
    stack_ids = stack_checks.planned_ids(sides.s, settings.only)
    if not stack_ids:
        session.require_checks(planned, settings, sides.reports["candidate"].results)
    return Plan(side_specs, ab_specs if has_baseline else [], op_specs, planned, stack_ids, saved_dir)


def ab_pair(sides: Sides, plan: Plan) -> measure.Pair | None:
    """How the A/B starts each fresh pair of workers; None without a baseline or an A/B check."""
    if not (plan.ab_specs or plan.op_specs):
        return None
    settings = sides.settings
    warm = ("memory",) if sides.device == "cpu" and any(c.aspect == "memory" for c in plan.ab_specs) else ()
    return measure.Pair(sides.pythons["baseline"], sides.pythons["candidate"], sides.out / "logs", settings.threads,
                        tuple(settings.python_path), measure.pinned_cpus(settings.threads or 1), warm,
                        Path(tempfile.mkdtemp(prefix="torch-upgrade-check-inductor-")))


# --- correctness ----------------------------------------------------------------------------------------------------

def correctness(sides: Sides, plan: Plan, pair: measure.Pair | None,
                launched: list[tuple[LiveWorker, LiveWorker]]) -> int | None:
    """Both sides' worker checks at once (correctness times nothing); an exit code when a side's worker failed.

    The baseline saves its outputs first, then marks them complete; the candidate's worker, its own checks done,
    waits for that mark before its cross-version checks compare with them. The A/B pair starts as soon as one side
    is done (a CPU is free): it imports torch and readies its profiler while the other side finishes; it measures
    nothing until both are done.
    """
    jobs: dict[str, Callable[[], Report]] = {
        "candidate": lambda: sides.side("candidate", plan.side_specs["candidate"], "worker-candidate")}
    if sides.s.has_baseline:
        jobs = {"baseline": lambda: _baseline_side(sides, plan), **jobs}
    launching = threading.Lock()

    def then_launch(job: Callable[[], Report]) -> Callable[[], Report]:
        def run_job() -> Report:
            try:
                return job()
            finally:
                with launching:
                    if pair is not None and not launched:
                        try:
                            launched.append(pair.launch(1))
                        except OSError:  # the A/B batch starts its pair itself, and reports what fails then
                            pass
        return run_job

    sides.reports.update(in_parallel({role: then_launch(job) for role, job in jobs.items()}))
    for r in sides.reports.values():
        if r.infra_error:
            return infra(sides.s.output, list(sides.reports.values()), r.infra_error)
    return None


def _baseline_side(sides: Sides, plan: Plan) -> Report:
    """The baseline's worker checks; its saved outputs marked complete once every save check ran (or it stopped)."""
    done_saving = compare.saved_mark(plan.saved_dir)
    save_ids = {c.id for c in plan.side_specs["baseline"] if c.params.get("mode") == "save"}

    def mark_saved() -> None:
        done_saving.parent.mkdir(parents=True, exist_ok=True)
        done_saving.touch()

    def on_update(r: Report) -> None:
        if not any(x.id in save_ids and x.outcome is Outcome.NOT_RUN for x in r.results):
            mark_saved()

    try:
        return sides.side("baseline", plan.side_specs["baseline"], "worker-baseline", on_update)
    finally:
        mark_saved()  # also when it failed: the candidate's worker must not wait for ever


# --- A/B ------------------------------------------------------------------------------------------------------------

def measure_ab(sides: Sides, plan: Plan, pair: measure.Pair, launched: list[tuple[LiveWorker, LiveWorker]]) -> None:
    """The A/B checks, then the op-latency checks (their pairs too are timed alone), each result recorded as decided."""
    s, settings = sides.s, sides.settings
    record = _recorder(sides, [*plan.ab_specs, *plan.op_specs])
    if plan.ab_specs:
        _measure(settings, plan.ab_specs, pair, launched.pop() if launched else None, s.thresholds, s.ab_budget_s,
                 record, s.undecided_policy, attributing=not s.no_attribution,
                 timeout_of=_sized_timeouts(settings, sides.reports))
    if plan.op_specs:  # after the A/B: its pairs too are timed alone
        optiming.measure(plan.op_specs, pair, timeout_s=settings.timeout_s, say=say,
                         launched=launched.pop() if launched else None,
                         on_result=lambda base, cand: _said(record(base, cand)))


def _measure(settings: session.Settings, ab_specs: list[CheckSpec], pair: measure.Pair,
             launched: tuple[LiveWorker, LiveWorker] | None, thresholds: compare.Thresholds, budget_s: float,
             record: Callable[..., CheckResult | None], policy: str, *, attributing: bool = True,
             timeout_of: Callable[[CheckSpec], float] | None = None) -> None:
    """The latency, memory and compile-time A/B, each result written to both sides' reports as it is decided; then,
    `attributing`, each regressed or undecided latency check's forward profiled op by op (orchestrate.attribute)."""
    kinds = [a for a in AB_ASPECTS if any(c.aspect == a for c in ab_specs)]
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
                    on_track=on_track, launched=launched, timeout_of=timeout_of)
    # after every A/B check is decided (its own pairs closed): where each slower forward's time went, op by op
    for track, cand in slower:
        say(f"{cand.id}: {cand.metrics.get('change')}; profiling both sides' forward op by op in fresh pairs")
        table = attribute.attribute(track.spec, pair, baseline_ms=float(cand.metrics.get("baseline_median") or 0.0),
                                    candidate_ms=float(cand.metrics.get("candidate_median") or 0.0),
                                    timeout_s=settings.timeout_s, ab_budget_s=budget_s, say=say,
                                    change=str(cand.metrics.get("change") or ""))
        record(*abjudge.results(track, settings.max_latency_ms, policy, attribution=table))


def _sized_timeouts(settings: session.Settings, reports: Mapping[str, Report]) -> Callable[[CheckSpec], float]:
    """An A/B request's timeout: its check's, sized from its workload's forward as the sides timed it before their
    checks (the slower side's figures; the floor for a workload neither timed), or the --timeout given."""
    budget = settings.budget()
    paces = slowest([r.thresholds.get("paces") for r in reports.values()])
    return lambda spec: budget.timeout(spec.aspect, paces.get(spec.workload))


def _recorder(sides: Sides, specs: list[CheckSpec]) -> Callable[..., CheckResult | None]:
    """Both reports' results of `specs`, not-run until recorded (a run killed meanwhile shows them so), then as
    `record(baseline_result, candidate_result)` gives them (again, to replace them); returns the candidate's."""
    repro_of = {c.id: sides.repro(c) for c in specs}
    pending = {role: {c.id: CheckResult(c.workload, c.aspect, c.device, c.dtype, Outcome.NOT_RUN,
                                        reason="not started", repro=repro_of[c.id]) for c in specs}
               for role in ("baseline", "candidate")}
    done = {role: sides.reports[role].results for role in pending}

    def record(base: CheckResult | None = None, cand: CheckResult | None = None) -> CheckResult | None:
        for role, result in (("baseline", base), ("candidate", cand)):
            if result is not None:
                pending[role][result.id] = replace(result, repro=repro_of[result.id])
            sides.reports[role] = replace(sides.reports[role], results=(*done[role], *pending[role].values()))
        sides.write()
        return cand

    record()
    return record


def _said(result: CheckResult | None) -> None:
    if result is not None:
        say(f"{result.outcome.value.upper():<10} {result.id:<44} {result.reason[:160]}")


# --- judge ----------------------------------------------------------------------------------------------------------

def judge(sides: Sides, started: float) -> int:
    """The candidate judged against the baseline's saved results, the fleet's memory, then the report and exit code."""
    s, reports = sides.s, sides.reports
    if s.has_baseline:
        reports["candidate"] = judge_against_baseline(
            reports["baseline"], mark_preexisting(reports["baseline"], reports["candidate"],
                                                  s.fail_on_shared_failures), s.fail_on_set)
    reports["candidate"] = fleet_memory(s.served, reports["candidate"], shlex.join(
        [PROG, *argv.compare_head(s), "--device", sides.device, *argv.fleet_flags(s, "memory")]))
    sides.reports = {k: replace(r, finished=session.now(), complete=True) for k, r in reports.items()}
    sides.write()
    return finish(s.output, list(sides.reports.values()), sides.out / "report.json", time.monotonic() - started)
