"""compare's stack checks: `stack[-]/resolve` before anything is installed, `<distribution>[-]/imports` after (no torch).

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

import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from torch_upgrade_check import stack, suite
from torch_upgrade_check.aspects._stack import DTYPE, WORKLOAD
from torch_upgrade_check.aspects.abi import host as abi
from torch_upgrade_check.aspects.api import host as apiscan
from torch_upgrade_check.aspects.imports import host as imports
from torch_upgrade_check.aspects.resolve import host as resolve
from torch_upgrade_check.commands.stack_sides import ROLES, where
from torch_upgrade_check.model import CheckResult, CheckSpec, Outcome, Report
from torch_upgrade_check.orchestrate import installer, provision, session
from torch_upgrade_check.orchestrate.workers import InfrastructureError

if TYPE_CHECKING:
    from torch_upgrade_check.commands.settings import CompareSettings, RunSettings

Sides = Mapping[str, tuple[provision.TorchSpec | None, str | None]]  # role -> (SPEC, prepared interpreter)


def selected(only: Sequence[str], workload: str, aspect: str) -> bool:
    return not only or suite.selected(CheckSpec(workload=workload, aspect=aspect, device="", dtype="-"), only)


def wanted(s: CompareSettings, only: Sequence[str], aspect: str) -> bool:
    """imports and abi run with a stack (unless --only leaves them out), or without one when --only asks for them."""
    if not selected(only, WORKLOAD, aspect):
        return False
    return bool(s.stack) or bool(only)


def planned_ids(s: CompareSettings, only: Sequence[str]) -> list[str]:
    """The stack checks `--list` shows: resolve with a stack, imports with a stack or when --only asks for it."""
    ids = []
    if s.stack and selected(only, WORKLOAD, resolve.ASPECT):
        ids.append(f"{WORKLOAD}[-]/{resolve.ASPECT}")
    ids += [f"{WORKLOAD}[-]/{aspect}" for aspect in (imports.ASPECT, abi.ASPECT) if wanted(s, only, aspect)]
    if scan_roots(s, only):
        ids.append(f"{WORKLOAD}[-]/{apiscan.ASPECT}")
    return ids


def scan_roots(s: RunSettings, only: Sequence[str]) -> list[str]:
    """What the api check scans: the --scan paths, or, when --only asks for api, the python-path folders (--python-path
    and the config's); none (no api check) otherwise, or when --only leaves api out."""
    if not selected(only, WORKLOAD, apiscan.ASPECT):
        return []
    if s.scan:
        return apiscan.check_roots(s.scan)
    if not only:
        return []
    return [*(s.cfg.resolved_python_path() if s.cfg is not None else []), *(str(Path(p).resolve()) for p in s.python_path)]


def _public(version: str) -> str:
    return version.split("+")[0]  # 2.13.0+cpu is the 2.13.0 a pin names


def _files(s: CompareSettings, role: str) -> str:
    return f"{', '.join(s.stacks[role].sources) or 'the stack'} {where(s.refs, role)}"


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
    team = resolve.pinned_by_team(stacks["baseline"].requirements, stacks["candidate"].requirements)
    if not team:
        return None
    return (f"torch {s.candidate} on both sides: the pull request leaves torch alone and changes the stack "
            f"({', '.join(sorted(team))}); each side installs its own stack, and the checks compare the stacks")


def early_device(device: str) -> str:
    """The device a stack check is filed under before the sides are probed: the one asked for, else the CPU."""
    return device if device != "auto" else "cpu"


def _pip(python: str, logs: Path) -> list[str]:
    """A pip for the dry runs: `python -m pip`, else one in a small venv uv seeds from `python` (the action's own
    venv, made by uv, has none)."""
    try:
        ok = subprocess.run([python, "-m", "pip", "--version"], capture_output=True, timeout=60, check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    if ok:
        return [python, "-m", "pip"]
    uv = installer.find_uv()
    if uv is None:
        raise InfrastructureError(f"the resolve check needs pip, and {python} has none (nor is uv here to make one); "
                                  f"install pip there, or pass --only to leave resolve out")
    folder = logs / "resolve-pip"
    installer.run_logged(installer.create_command("uv", python, folder, uv), logs / "resolve-pip.log",
                         "making a venv with pip for the resolve check", say=lambda _: None,
                         env=installer.installer_env("uv"))
    return [str(provision.venv_python(folder)), "-m", "pip"]


def side_index(s: CompareSettings, spec: provision.TorchSpec) -> resolve.Index:
    """Where a side's torch comes from (its backend's index, or --index-url), for a dry run."""
    return resolve.Index(s.index_url or provision.index_for(s.torch_backend, spec, provision.detect_cuda_driver()),
                         s.extra_index_url, s.find_links, spec.pre)


def torch_not_on_index(s: CompareSettings, sides: Sides, base_python: str, out: Path) -> str | None:
    """After an install failed: the line naming a side's torch version that its index does not have (the team's
    input: exit 2), from pip's dry run of torch alone; None when each side's torch is there (or pip cannot ask)."""
    for role, (spec, prepared) in sides.items():
        if spec is None or prepared or spec.kind == "current":
            continue
        try:
            pip = _pip(base_python, out / "logs")
        except InfrastructureError:
            return None
        why = resolve.torch_absent(pip, spec.requirement, spec.text, side_index(s, spec),
                                   out / "logs" / f"torch-on-index-{role}.log", env=installer.installer_env("pip"))
        if why:
            return (f"the {role}'s {why}; pass a torch version that index has, or the --torch-backend (or --index-url) "
                    "that has this one")
    return None


@dataclass(frozen=True)
class Blocked:
    """The resolve stage found a side's stack that cannot be installed: the team's files (exit 2, `message` names
    them and the fix) or the runner's (exit 3: pip timed out or could not reach the index)."""

    message: str
    runner: bool


def resolve_stage(s: CompareSettings, only: Sequence[str], sides: Sides, base_python: str, out: Path, *,
                  repro: str, say: Callable[[str], None]) -> tuple[dict[str, CheckResult], Blocked | None]:
    """Each side's resolve result ({} without a stack, or when --only leaves it out), each side resolving its own
    stack (s.stacks), and what blocks the run: a side whose stack does not resolve on its own."""
    stacks, stk = s.stacks, s.stack
    if not (stk or any(stacks.values())) or not selected(only, WORKLOAD, resolve.ASPECT):
        return {}, None
    device = early_device(s.device)
    todo, skipped = [], {}
    for role, (spec, prepared) in sides.items():
        if spec is None or prepared or spec.kind == "current":
            skipped[role] = CheckResult(WORKLOAD, resolve.ASPECT, device, DTYPE, Outcome.SKIPPED,
                                        reason="a prepared interpreter (or current): nothing is installed into it",
                                        repro=repro)
            continue
        own = stacks.get(role, stk)
        todo.append(resolve.Side(role, spec.requirement, side_index(s, spec), spec.text,
                                 (*s.extra_requirement, *own.requirements)))
    if not todo or todo[-1].role != "candidate":
        return skipped, None
    logs = out / "logs"
    results = resolve.check(todo, [*s.extra_requirement, *stk.requirements], _pip(base_python, logs), logs,
                            device=device, repro=repro, say=say, env=installer.installer_env("pip"))
    blocked = None
    for role, r in results.items():
        say(f"{role}: resolve {r.outcome.value}: {r.reason[:300]}")
        if r.outcome is Outcome.ERROR and blocked is None:
            blocked = _blocked(s.refs, role, stacks.get(role, stk), r, logs)
    return {**skipped, **results}, blocked


def _blocked(refs: Mapping[str, str | None], role: str, own: stack.Stack, r: CheckResult, logs: Path) -> Blocked:
    m = resolve.Metrics.from_dict(r.metrics)
    log = m.log if m.has("log") else logs
    if m.torch_absent:  # the index's answer, named: the side's torch version is not there
        return Blocked(f"the {role}'s {r.reason} (log: {log}); pass a torch version that index has, or the "
                       "--torch-backend (or --index-url) that has this one", False)
    if m.runner:
        return Blocked(f"{r.reason} (log: {log}); pip could not finish: check the runner's network and index, then "
                       "run again", True)
    files = f"{', '.join(own.sources) or 'the stack'} {where(refs, role)}"
    fix = ("fix those files there, or pass --baseline VERSION with the torch they do install with"
           if role == "baseline" else "fix those files (the pull request's)")
    return Blocked(f"the {role}'s stack ({files}) cannot be installed: {r.reason} (log: {log}); {fix}", False)


def with_results(reports: dict[str, Report], results: Mapping[str, CheckResult]) -> dict[str, Report]:
    return {role: replace(r, results=(*r.results, results[role])) if role in results else r for role, r in reports.items()}


def resolve_first(s: CompareSettings, only: Sequence[str], sides: Sides, base_python: str, out: Path,
                  reports: dict[str, Report], *, repro: Callable[[str, CheckSpec], str],
                  say: Callable[[str], None]) -> tuple[dict[str, Report], bool, Blocked | None]:
    """The reports with each side's resolve result; whether the run stops here (the candidate's stack does not
    resolve, so nothing is installed for it: the reports are then complete, labelled with the torch resolved);
    and what blocks the run, when a side's own stack cannot be installed (the caller ends with its exit code)."""
    device = early_device(s.device)
    results, blocked = resolve_stage(s, only, sides, base_python, out, say=say,
                                     repro=repro(device, CheckSpec(WORKLOAD, resolve.ASPECT, device, DTYPE)))
    reports = with_results(reports, results)
    cand = results.get("candidate")
    same = None if blocked is not None else nothing_compared(
        s, {role: str(r.metrics.get("torch", "")) for role, r in results.items()}, "resolve")
    if same is not None:  # the pull request's torch bump would be tested against itself: stop before installing
        blocked = Blocked(same, False)
    if blocked is None and (cand is None or cand.outcome is not Outcome.FAILED):
        return reports, False, None
    return {role: replace(r, finished=session.now(), complete=True, device=device,
                          label=str(results[role].metrics.get("torch", "?")) if role in results else "?")
            for role, r in reports.items()}, True, blocked


def own_requirements(s: CompareSettings) -> dict[str, tuple[str, ...]]:
    """Each side's own requirements when the two sides' stacks were read apart (at their refs); {} when they are one,
    so nothing is the pull request's doing."""
    base, cand = s.stacks.get("baseline"), s.stacks.get("candidate")
    if base is None or cand is None or base is cand:
        return {}
    return {"baseline": base.requirements, "candidate": cand.requirements}


def installed_stage(s: CompareSettings, only: Sequence[str], pythons: Mapping[str, str],
                    reports: dict[str, Report], device: str, *, timeout_s: float, repro: Callable[[CheckSpec], str],
                    say: Callable[[str], None]) -> dict[str, Report]:
    """The reports with each side's imports and abi results, each when it is wanted."""
    labels = {role: r.label for role, r in reports.items()}
    listings = ({role: imports.listing(python) for role, python in pythons.items()}
                if wanted(s, only, imports.ASPECT) or wanted(s, only, abi.ASPECT) else {})
    removed = imports.removed_by_team(own_requirements(s), listings)
    if removed:
        say(f"imports, abi: {len(removed)} distributions the baseline has are removed by the team's pull request "
            f"(its requirements drop {', '.join(sorted(set(removed.values())))}): reported, not failed")
    if wanted(s, only, imports.ASPECT):
        results = imports.check(pythons, device=device, timeout_s=min(timeout_s, imports.TIMEOUT_S),
                                repro=repro(CheckSpec(WORKLOAD, imports.ASPECT, device, DTYPE)),
                                baseline_label=labels.get("baseline", ""), say=say, listings=listings, removed=removed)
        for role, r in results.items():
            say(f"{role}: imports {r.outcome.value}: {r.reason[:300]}")
        reports = with_results(reports, results)
    if wanted(s, only, abi.ASPECT):
        envs = {role: abi.Environment({d: (str(v["version"]), list(v["libraries"])) for d, v in listings[role].items()})
                for role in pythons}
        results = abi.check(envs, device=device, labels=labels, removed=removed,
                            repro=repro(CheckSpec(WORKLOAD, abi.ASPECT, device, DTYPE)))
        for role, r in results.items():
            say(f"{role}: abi {r.outcome.value}: {r.reason[:300]}")
        reports = with_results(reports, results)
    roots = scan_roots(s, only)
    if roots:
        results = apiscan.check(pythons, roots, device=device, timeout_s=max(timeout_s, apiscan.TIMEOUT_S),
                                repro=repro(CheckSpec(WORKLOAD, apiscan.ASPECT, device, DTYPE)),
                                baseline_label=labels.get("baseline", ""), say=say)
        for role, r in results.items():
            say(f"{role}: api {r.outcome.value}: {r.reason[:300]}")
        reports = with_results(reports, results)
    return reports
