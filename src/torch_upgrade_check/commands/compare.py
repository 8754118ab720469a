"""The `compare` command, phase by phase: plan sides, provision them (compare_sides.py), correctness on both, the A/B,
judge; one report."""

from __future__ import annotations

import shlex
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from torch_upgrade_check import __version__
from torch_upgrade_check.analysis import abjudge
from torch_upgrade_check.analysis.sides import judge_against_baseline, mark_preexisting
from torch_upgrade_check.aspects import AB_ASPECTS, PER_SIDE_ASPECTS, ab_of
from torch_upgrade_check.commands import argv, stack_checks
from torch_upgrade_check.commands.common import PROG, finish, fleet_memory, infra, say
from torch_upgrade_check.commands.compare_sides import Sides, in_parallel, plan_sides, provision_sides
from torch_upgrade_check.commands.settings import CompareSettings
from torch_upgrade_check.errors import EXIT_PASSED
from torch_upgrade_check.model import CheckResult, CheckSpec, Outcome, Report
from torch_upgrade_check.orchestrate import attribute, compare, hostload, measure, optiming, session
from torch_upgrade_check.orchestrate.budget import slowest
from torch_upgrade_check.orchestrate.live import LiveWorker
from torch_upgrade_check.report import costs


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
        if pair is not None:
            hostload.release()  # measuring is over: another compare may have these CPUs while this one judges
    return judge(ready, started)


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
    warm = cpu_warm_up(plan.ab_specs) if sides.device == "cpu" else ()
    cpus, why = measure.pinned_cpus(settings.threads or 1)
    return measure.Pair(sides.pythons["baseline"], sides.pythons["candidate"], sides.out / "logs", settings.threads,
                        tuple(settings.python_path), cpus, warm,
                        Path(tempfile.mkdtemp(prefix="torch-upgrade-check-inductor-")), cpus_why=why)


def cpu_warm_up(ab_specs: list[CheckSpec]) -> tuple[str, ...]:
    """The A/B aspects planned whose workers ready the CPU profiler before they are pinned (their AB's cpu_profiler)."""
    return tuple(dict.fromkeys(c.aspect for c in ab_specs if ab_of(c.aspect).cpu_profiler))


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
            f"-{budget_s * measure.COMPILE_BUDGET_MOST:g} s" if any(ab_of(k).cold_compiles for k in kinds) else "")
    say(f"{', '.join(kinds)}: {len(ab_specs)} checks A/B, in batches of interleaved rounds, each batch in a fresh "
        f"pair of workers ({settings.threads} CPU threads each; up to {budget_s:g} s a check{cold})")
    if pair.cpus:
        say(f"A/B workers pinned to CPU{'s' if len(pair.cpus) != 1 else ''} {', '.join(map(str, pair.cpus))}: "
            f"{pair.cpus_why}")
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
    reports["candidate"] = fleet_memory(s.served, reports["candidate"], lambda only: shlex.join(
        [PROG, *argv.compare_head(s), "--device", sides.device, *argv.fleet_flags(s, only)]))
    sides.reports = {k: replace(r, finished=session.now(), complete=True) for k, r in reports.items()}
    sides.write()
    return finish(s.output, list(sides.reports.values()), sides.out / "report.json", time.monotonic() - started)
