"""compare's two sides, before any check: each side's report planned, its interpreter provisioned (prepared, or a
venv from the store) and probed, the device both use chosen; `Sides`, what every later phase shares."""

from __future__ import annotations

import os
import shlex
import shutil
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypeVar

from torch_upgrade_check import stack
from torch_upgrade_check.analysis.sides import decide_side
from torch_upgrade_check.commands import argv, stack_checks, stack_sides
from torch_upgrade_check.commands.common import PROG, finish, fleet_result, infra, say, team_input, with_device_limits
from torch_upgrade_check.commands.settings import CompareSettings, Install
from torch_upgrade_check.hostchecks import pytest_passthrough
from torch_upgrade_check.model import CheckSpec, Report
from torch_upgrade_check.orchestrate import device_choice, provision, session, store
from torch_upgrade_check.orchestrate.workers import InfrastructureError
from torch_upgrade_check.schema import write_reports

T = TypeVar("T")


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
    versions: dict[str, str | None] = {}  # None where a probe named no torch: not evidence of the same torch
    for role in reports:
        env = {**session.environment(probes[role]), "device_choice": choice.record(s.device)}
        versions[role] = env.get("torch_version")
        reports[role] = replace(reports[role], device=device, label=env.get("torch_version", "?"), environment=env)
    same = stack_checks.nothing_compared(s, versions, "install")
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
