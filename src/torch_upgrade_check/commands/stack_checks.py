"""compare's stack checks, each reached through its row (aspects.TABLE's host rows, at their `stage`: resolve before
anything is installed, imports, abi and api after), its folder's host.py called as `on_host(context)` (no torch).

Each side's stack is read at its own git ref (`stack_sides.side_stacks`): the baseline's files as --base-ref has them, the
candidate's as --head-ref (or the working tree) has them. commands/compare.py calls these at two points and
otherwise runs as before: the results join each side's report first, so the worker's checks add to them. A
candidate whose stack does not resolve with its torch stops the run there (exit 1): nothing is installed for it.
A side whose stack does not resolve on its own is the team's file (exit 2), unless pip could not reach the index
(exit 3); so is a side's torch version its index does not have, and two different requests whose sides resolve or
install the same torch: a pull request that moves torch's pin with both sides `auto`, or one side given (`--candidate
2.14.1 --baseline auto`, a range) (`nothing_compared`: never a PASSED that compared nothing; the same SPEC given
on both sides is an A/A and runs).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from torch_upgrade_check.aspects import HOST_STAGES, Stage, part
from torch_upgrade_check.aspects._stack import WORKLOAD
from torch_upgrade_check.commands.stack_sides import ROLES, where
from torch_upgrade_check.hostchecks.context import HostContext
from torch_upgrade_check.model import CheckResult, CheckSpec, Outcome, Report
from torch_upgrade_check.orchestrate import provision, session

if TYPE_CHECKING:
    from torch_upgrade_check.commands.settings import CompareSettings

Sides = Mapping[str, tuple[provision.TorchSpec | None, str | None]]  # role -> (SPEC, prepared interpreter)


def hosts(stage: Stage) -> list[tuple[str, ModuleType]]:
    """The host checks compare runs at `stage`, in the table's order: each aspect's name and its folder's host.py."""
    found = [(name, part(name, "host")) for name in HOST_STAGES[stage]]
    return [(name, module) for name, module in found if module is not None]


def planned_ids(s: CompareSettings, only: Sequence[str]) -> list[str]:
    """The stack checks `--list` shows, each as its host.py's `planned` says: resolve with a stack; imports and abi
    with a stack or when --only asks for them; api with a path to scan."""
    return [f"{WORKLOAD}[-]/{name}" for stage in Stage for name, host in hosts(stage) if host.planned(s, only)]


def _public(version: str) -> str:
    return version.split("+")[0]  # 2.13.0+cpu is the 2.13.0 a pin names


def _files(s: CompareSettings, role: str) -> str:
    """A side's stack files (its own, else the run's) and where they were read."""
    return f"{', '.join(s.stacks.get(role, s.stack).sources) or 'the stack'} {where(s.refs, role)}"


def _asked(s: CompareSettings, role: str) -> str:
    """A side's request as the team gave it: `auto` with the pin its files hold, or the SPEC."""
    spec = getattr(s, role)
    return f"--{role} auto ({_files(s, role)}: {spec})" if role in s.auto else f"--{role} {spec}"


def _one_side_given(s: CompareSettings, got: Mapping[str, str], verb: str) -> str | None:
    """A run with at least one side given (a version, a range, nightly, current) whose two requests differ but get the
    same torch: nothing would be compared. The same SPEC on both sides, as given (`--baseline 2.13.0 --candidate
    2.13.0`), is an A/A the team asked for; a prepared interpreter (--*-python) is the team's own choice."""
    if s.baseline_spec is None or s.candidate_spec is None or got["baseline"] != got["candidate"]:
        return None
    if not s.auto and s.baseline == s.candidate:
        return None
    return (f"{_asked(s, 'baseline')} and {_asked(s, 'candidate')} are different requests, but both sides {verb} "
            f"torch {got['candidate']}: nothing would be compared; pass the two torches you mean (--baseline VERSION "
            "--candidate VERSION), or the same SPEC on both sides for an A/A")


def nothing_compared(s: CompareSettings, versions: Mapping[str, str | None], verb: str) -> str | None:
    """The line that stops a comparison that would not happen (exit 2, the team's input): two different requests
    (one side given, or both `auto` with the pull request's files moving torch's pin) whose sides `verb` (resolve,
    install) the same torch, or an `auto` side that gets a torch other than the version its files pin. None when
    each side has the torch it asked, or the team asked the same SPEC on both sides (an A/A)."""
    if not all(versions.get(role) for role in ROLES):
        return None
    got = {role: str(versions[role]) for role in ROLES}
    if set(s.auto) != set(ROLES):
        return _one_side_given(s, got, verb)
    pins = {"baseline": s.baseline or "", "candidate": s.candidate or ""}
    files = {role: _files(s, role) for role in ROLES}
    fix = ("pin the torch each side means there (torch==VERSION, or its lock file), or pass --baseline VERSION "
           "--candidate VERSION")
    # the same build: a pull request from 2.13.0 to 2.13.0+cpu changes the build, and 2.13.0 → 2.13.0+cpu is compared
    if pins["baseline"] != pins["candidate"] and got["baseline"] == got["candidate"]:
        return (f"the pull request moves torch's pin ({files['baseline']}: {pins['baseline']}; {files['candidate']}: "
                f"{pins['candidate']}), but both sides {verb} torch {got['candidate']}: nothing would be compared; {fix}")
    for role in ROLES:
        pinned = pins[role]
        if provision.VERSION_RE.match(pinned) and _public(got[role]) != _public(pinned):
            return (f"the {role}'s {files[role]} pins torch {pinned}, but it would {verb} torch {got[role]}: the "
                    f"comparison would not test the pin; {fix}")
    return None


def unchanged_torch_note(s: CompareSettings) -> str | None:
    """The line saying a pull request leaves torch alone and changes the stack: the stacks are what is compared."""
    stacks = s.stacks
    if set(s.auto) != set(ROLES) or s.baseline != s.candidate or stacks["baseline"] is stacks["candidate"]:
        return None
    base, cand = stacks["baseline"].requirements, stacks["candidate"].requirements
    # the packages whose requirements the team changed, as the checks run before installing read two stacks
    team = set().union(*(host.pinned_by_team(base, cand) for _, host in hosts(Stage.BEFORE_INSTALL)
                         if hasattr(host, "pinned_by_team")))
    if not team:
        return None
    return (f"torch {s.candidate} on both sides: the pull request leaves torch alone and changes the stack "
            f"({', '.join(sorted(team))}); each side installs its own stack, and the checks compare the stacks")


def early_device(device: str) -> str:
    """The device a stack check is filed under before the sides are probed: the one asked for, else the CPU."""
    return device if device != "auto" else "cpu"


def torch_not_on_index(s: CompareSettings, sides: Sides, base_python: str, out: Path) -> str | None:
    """After an install failed: the line naming a side's torch version that its index does not have (the team's
    input: exit 2), as the first host check run before installing that can ask says (its `torch_not_on_index`);
    None when each side's torch is there (or none can ask)."""
    for _, host in hosts(Stage.BEFORE_INSTALL):
        ask = getattr(host, "torch_not_on_index", None)
        why = ask(s, sides, base_python, out) if ask is not None else None
        if why:
            return why
    return None


@dataclass(frozen=True)
class Blocked:
    """The resolve stage found a side's stack that cannot be installed: the team's files (exit 2, `message` names
    them and the fix) or the runner's (exit 3: pip timed out or could not reach the index)."""

    message: str
    runner: bool


def resolve_stage(s: CompareSettings, only: Sequence[str], sides: Sides, base_python: str, out: Path, *,
                  repro: Callable[[CheckSpec], str], say: Callable[[str], None]) -> tuple[dict[str, CheckResult], Blocked | None]:
    """Each side's results of the checks run before anything is installed (Stage.BEFORE_INSTALL: resolve; {} without
    a stack, or when --only leaves it out), and what blocks the run: a side whose stack does not resolve on its own
    (the first error a check's `blocking` hook names)."""
    context = HostContext(s, only, early_device(s.device), repro, say, sides=sides, base_python=base_python, out=out)
    logs = out / "logs"
    results: dict[str, CheckResult] = {}
    blocked = None
    for _, host in hosts(Stage.BEFORE_INSTALL):
        got = host.on_host(context)
        blocking = getattr(host, "blocking", None)
        for role, r in got.items():
            if r.outcome is Outcome.ERROR and blocked is None and blocking is not None:
                blocked = Blocked(*blocking(role, r, _files(s, role), logs))
        results.update(got)
    return results, blocked



def with_results(reports: dict[str, Report], results: Mapping[str, CheckResult]) -> dict[str, Report]:
    return {role: replace(r, results=(*r.results, results[role])) if role in results else r for role, r in reports.items()}


def resolve_first(s: CompareSettings, only: Sequence[str], sides: Sides, base_python: str, out: Path,
                  reports: dict[str, Report], *, repro: Callable[[str, CheckSpec], str],
                  say: Callable[[str], None]) -> tuple[dict[str, Report], bool, Blocked | None]:
    """The reports with each side's resolve result; whether the run stops here (the candidate's stack does not
    resolve, so nothing is installed for it: the reports are then complete, labelled with the torch resolved);
    and what blocks the run, when a side's own stack cannot be installed (the caller ends with its exit code)."""
    device = early_device(s.device)
    results, blocked = resolve_stage(s, only, sides, base_python, out, say=say, repro=lambda spec: repro(device, spec))
    reports = with_results(reports, results)
    cand = results.get("candidate")
    verb = next((host.VERB for _, host in hosts(Stage.BEFORE_INSTALL)), "")  # what it did to each side's torch
    same = None if blocked is not None else nothing_compared(
        s, {role: str(r.metrics.get("torch", "")) for role, r in results.items()}, verb)
    if same is not None:  # the pull request's torch bump would be tested against itself: stop before installing
        blocked = Blocked(same, False)
    if blocked is None and (cand is None or cand.outcome is not Outcome.FAILED):
        return reports, False, None
    return {role: replace(r, finished=session.now(), complete=True, device=device,
                          label=str(results[role].metrics.get("torch", "?")) if role in results else "?")
            for role, r in reports.items()}, True, blocked


def installed_stage(s: CompareSettings, only: Sequence[str], pythons: Mapping[str, str],
                    reports: dict[str, Report], device: str, *, timeout_s: float, repro: Callable[[CheckSpec], str],
                    say: Callable[[str], None]) -> dict[str, Report]:
    """The reports with each side's results of the checks run in the installed environments (Stage.INSTALLED:
    imports, abi, api), each when its host.py's `planned` says it is wanted."""
    context = HostContext(s, only, device, repro, say, pythons=pythons, timeout_s=timeout_s,
                          labels={role: r.label for role, r in reports.items()})
    for _, host in hosts(Stage.INSTALLED):
        if host.planned(s, only):
            reports = with_results(reports, host.on_host(context))
    return reports
