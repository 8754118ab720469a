"""One torch, one device: probe the interpreter, plan the checks, run them, decide, report progress."""

from __future__ import annotations

import datetime as dt
import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from torch_upgrade_check import __version__, suite
from torch_upgrade_check.analysis.verdicts import decide
from torch_upgrade_check.aspects import ASPECT
from torch_upgrade_check.errors import UsageError
from torch_upgrade_check.model import DEVICES, CheckResult, CheckSpec, Observation, Outcome, Report, Status
from torch_upgrade_check.orchestrate import budget as budgets
from torch_upgrade_check.orchestrate.workers import InfrastructureError, WorkerSession, run_worker


@dataclass(frozen=True)
class Settings:
    """What shapes a run, gathered from flags (and the config file) before anything starts."""

    out: Path
    requested_device: str = "auto"
    only: tuple[str, ...] = ()
    workloads: tuple[suite.Workload, ...] = suite.BUILTIN
    timeout_s: float = budgets.BASE_S
    # True: timeout_s is the floor, each check's timeout sized from its workload's forward (no --timeout given)
    size_timeouts: bool = False
    threads: int | None = None
    python_path: tuple[str, ...] = ()
    max_latency_ms: dict[str, float] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)  # rtol/atol overrides for every check
    params_by_workload: dict[str, dict[str, Any]] = field(default_factory=dict)  # from the config file
    command: tuple[str, ...] = ()
    pytest_args: tuple[str, ...] | None = None  # the config's pytest selection, run with the torch under test
    config_root: Path | None = None

    def thresholds(self) -> dict[str, Any]:
        return {"timeout_s": self.timeout_s, "timeout_sized": self.size_timeouts,
                "max_latency_ms": dict(self.max_latency_ms), **self.params}

    def budget(self) -> budgets.Budget:
        """How each check's timeout is found: sized from its workload's forward, or the --timeout given."""
        if self.size_timeouts:
            return budgets.Budget(base_s=self.timeout_s, cap_s=max(budgets.CAP_S, self.timeout_s), pace_s=self.timeout_s)
        return budgets.Budget(base_s=self.timeout_s, fixed_s=self.timeout_s, pace_s=self.timeout_s)


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def resolve_python(python: str) -> str:
    """An interpreter path that exists, or a UsageError naming what was asked: a path or name given that this
    machine does not have is the team's input (exit 2), not the runner's failure."""
    if os.path.sep in python or (os.altsep and os.altsep in python):
        if os.path.exists(python):
            return python
    elif shutil.which(python):
        return shutil.which(python) or python
    raise UsageError(f"interpreter {python} not found; pass the path of a Python that has torch (or its name on PATH)")


def new_report(settings: Settings, role: str = "") -> Report:
    return Report(tool_version=__version__, device=settings.requested_device, requested_device=settings.requested_device,
                  label="", command=list(settings.command), started=now(), thresholds=settings.thresholds(), role=role)


def probe(python: str, settings: Settings, name: str = "probe") -> WorkerSession:
    return run_worker(python, [], log_dir=settings.out / "logs", timeout_s=settings.timeout_s, probe=DEVICES,
                      threads=settings.threads, log_prefix=name)


def environment(session: WorkerSession) -> dict[str, Any]:
    probes = {k: {"available": v[0], "reason": v[1]} for k, v in session.probes.items()}
    return {**session.environment, "probes": probes}


def plan(settings: Settings, device: str, *, aspects: Sequence[str] | None = None) -> list[CheckSpec]:
    specs = [replace(s, params=dict(settings.params_by_workload.get(s.workload, settings.params)))
             for s in suite.plan(settings.workloads, device, settings.only)]
    if aspects is not None:
        specs = [s for s in specs if s.aspect in aspects]
    return specs


def require_checks(specs: Sequence[CheckSpec], settings: Settings, decided: Sequence[CheckResult] = ()) -> None:
    """UsageError when --only selects nothing: no check planned, no pytest, none `decided` before the run (the
    environment's own checks, like environment[-]/fleet)."""
    if not specs and not decided and not pytest_selected(settings):
        raise UsageError(f"--only {' '.join(settings.only)} matches no check; try --list, or patterns like 'mlp', "
                         "'latency' or 'flex*'")


def planned_skip(spec: CheckSpec, requested: str, probes: dict[str, tuple[bool, str]]) -> str:
    if spec.aspect in ASPECT and ASPECT[spec.aspect].against_cpu and spec.device == "cpu":
        if requested == "cpu":
            return f"{spec.aspect} compares an accelerator with the CPU, and --device cpu was asked"
        why = "; ".join(probes[d][1] for d in ("cuda", "mps") if d in probes)
        return f"no accelerator to compare with the CPU ({why})"
    return ""


class Progress:
    """One line per finished check on the terminal: count, outcome, id, time, reason."""

    def __init__(self, total: int, say: Callable[[str], None], tag: str = "") -> None:
        self.total, self.done, self.say, self.tag = total, 0, say, tag
        self.width = len(str(max(total, 1)))

    def __call__(self, result: CheckResult, seconds: float) -> None:
        self.done += 1
        tag = f"{self.tag} " if self.tag else ""
        self.say(f"[{self.done:>{self.width}}/{self.total}] {tag}{result.outcome.value.upper():<10} {result.id:<48} "
                 f"{seconds:6.1f}s  {result.reason[:110]}")


def execute(
    python: str,
    specs: Sequence[CheckSpec],
    settings: Settings,
    report: Report,
    *,
    probes: dict[str, tuple[bool, str]],
    repro: Callable[[CheckSpec], str],
    on_update: Callable[[Report], None],
    progress: Progress,
    log_prefix: str = "worker",
    decide_fn: Callable[[CheckSpec, Observation, str], CheckResult] | None = None,
) -> Report:
    """Run `specs` in workers of `python`; `report` gains a result per spec, written after each check.

    Checks not yet finished are `not-run` in every intermediate report, so a killed run says so. The team's pytest
    runs after these, by the command (hostchecks.pytest_passthrough.after_checks).
    """
    def default_decide(spec: CheckSpec, obs: Observation, rep: str) -> CheckResult:
        return decide(spec, obs, max_latency_ms=settings.max_latency_ms, repro=rep)

    decide_fn = decide_fn or default_decide
    results = {r.id: r for r in report.results}
    for s in specs:
        results[s.id] = CheckResult(s.workload, s.aspect, s.device, s.dtype, Outcome.NOT_RUN, reason="not started",
                                    repro=repro(s))
    to_run = []
    for s in specs:
        skip = planned_skip(s, settings.requested_device, probes)
        if skip:
            results[s.id] = decide_fn(s, Observation(s.id, Status.SKIPPED, message=skip), results[s.id].repro)
            progress(results[s.id], 0.0)
        else:
            to_run.append(s)

    def current() -> Report:
        return replace(report, results=tuple(results.values()))

    on_update(current())

    def on_paced(worker: WorkerSession, workload: str) -> None:
        nonlocal report
        mine = [s for s in to_run if s.workload == workload]
        report = replace(report, thresholds=merged(report.thresholds, sized(budget, mine, worker, workload,
                                                                             progress.say)))
        on_update(current())

    def on_observation(spec: CheckSpec, obs: Observation) -> None:
        results[spec.id] = decide_fn(spec, obs, results[spec.id].repro)
        on_update(current())
        progress(results[spec.id], obs.duration_s)

    budget = settings.budget()
    try:
        if to_run:
            run_worker(python, to_run, log_dir=settings.out / "logs", timeout_s=settings.timeout_s,
                       threads=settings.threads, python_path=list(settings.python_path), log_prefix=log_prefix,
                       on_observation=on_observation, budget=budget, on_paced=on_paced)
    except InfrastructureError as e:
        return replace(current(), infra_error=str(e), finished=now())
    return current()


def sized(budget: budgets.Budget, specs: Sequence[CheckSpec], worker: WorkerSession, workload: str,
          say: Callable[[str], None]) -> dict[str, Any]:
    """Once `workload`'s forward is timed, before its checks (`specs`): its pace, its checks whose timeout was raised
    above the floor, and those expected to outlive theirs (said now, with what to set); for the report's thresholds."""
    pace = worker.paces.get(workload, budgets.Pace(None))
    if pace.forward_s is None:
        say(f"{workload}'s forward was not timed ({worker.said.get(workload, {}).get('error', 'no figure')}): its "
            f"checks keep the {budget.base_s:g} s timeout")
    timeouts = budgets.timeouts(budget, specs, worker.paces)
    raised = {check: round(t, 1) for check, t in timeouts.items() if t > budget.base_s}
    if raised:
        each = ", ".join(f"{check} {t:g} s" for check, t in raised.items())
        say(f"timeouts sized above {budget.base_s:g} s from {workload}'s forward: {each}")
    unfit = budgets.unfit(budget, specs, worker.paces)
    for u in unfit:
        say(f"may not fit its budget: {u.line()}")
    return {"paces": {workload: {"forward_s": None if pace.forward_s is None else round(pace.forward_s, 6),
                                 "ops": pace.ops}},
            "check_timeouts_s": raised, "over_budget": [u.line() for u in unfit]}


def merged(thresholds: dict[str, Any], more: dict[str, Any]) -> dict[str, Any]:
    """The report's thresholds with one more workload's sizing added (dicts joined, lists extended)."""
    out = dict(thresholds)
    for key, value in more.items():
        before = out.get(key)
        if isinstance(value, dict):
            out[key] = {**(before if isinstance(before, dict) else {}), **value}
        elif isinstance(value, list):
            out[key] = [*(before if isinstance(before, list) else []), *value]
    return out


def pytest_selected(settings: Settings) -> bool:
    """The config selects a pytest run and --only (if given) keeps it."""
    return settings.pytest_args is not None and (not settings.only or any(p in ("pytest", "pytest*", "*")
                                                                          for p in settings.only))
