"""compare's stack checks: `stack[-]/resolve` before anything is installed, `<distribution>[-]/imports` after (no torch).

compare_cmd.py calls these at two points and otherwise runs as before: the results join each side's report
first, so the worker's checks add to them. A candidate whose stack does not resolve stops the run there
(exit 1): nothing is installed for it.
"""

from __future__ import annotations

import argparse
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from torch_upgrade_check import stack, suite
from torch_upgrade_check.errors import UsageError
from torch_upgrade_check.model import CheckResult, CheckSpec, Outcome, Report
from torch_upgrade_check.orchestrate import abi, imports, installer, provision, resolve, session
from torch_upgrade_check.orchestrate.workers import InfrastructureError

WORKLOAD = "stack"  # the workload name of every stack check: stack[-]/resolve, stack[-]/imports, stack[-]/abi
Sides = Mapping[str, tuple[provision.TorchSpec | None, str | None]]  # role -> (SPEC, prepared interpreter)


def selected(only: Sequence[str], workload: str, aspect: str) -> bool:
    return not only or suite.selected(CheckSpec(workload=workload, aspect=aspect, device="", dtype="-"), only)


def wanted(args: argparse.Namespace, only: Sequence[str], aspect: str) -> bool:
    """imports and abi run with a stack (unless --only leaves them out), or without one when --only asks for them."""
    if not selected(only, WORKLOAD, aspect):
        return False
    return bool(getattr(args, "stack", None)) or bool(only)


def planned_ids(args: argparse.Namespace, only: Sequence[str]) -> list[str]:
    """The stack checks `--list` shows: resolve with a stack, imports with a stack or when --only asks for it."""
    ids = []
    if getattr(args, "stack", None) and selected(only, resolve.WORKLOAD, resolve.ASPECT):
        ids.append(f"{resolve.WORKLOAD}[-]/{resolve.ASPECT}")
    ids += [f"{WORKLOAD}[-]/{aspect}" for aspect in (imports.ASPECT, abi.ASPECT) if wanted(args, only, aspect)]
    return ids


def auto_pins(args: argparse.Namespace) -> None:
    """`--baseline auto` / `--candidate auto`: the torch the stack's files pin at --base-ref / --head-ref (the working
    tree without --head-ref), read with the stack's own parsers; args.baseline / args.candidate become that SPEC."""
    problems: list[str] = []
    for role, flag in (("baseline", "base_ref"), ("candidate", "head_ref")):
        if getattr(args, role, None) != "auto":
            continue
        ref = getattr(args, flag, None)
        option = "--" + flag.replace("_", "-")
        if role == "baseline" and not ref:
            problems.append("--baseline auto reads the torch pin at --base-ref REF; pass one (a pull request's base "
                            "branch, like origin/main, or HEAD^1 on its merge commit)")
            continue
        try:
            found = stack.from_args(args, read=stack.at_ref(ref, option) if ref else None)
            if not found:
                raise UsageError(f"--{role} auto reads the torch pin from the stack's files; pass --requirements FILE "
                                 "(or the config's requirements:)")
            setattr(args, role, stack.torch_spec(found, f"at {option} {ref}" if ref else "in the working tree"))
        except UsageError as e:
            problems += e.problems
    if problems:
        raise UsageError(*problems)


def early_device(args: argparse.Namespace) -> str:
    """The device a stack check is filed under before the sides are probed: the one asked for, else the CPU."""
    return args.device if args.device != "auto" else "cpu"


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


def resolve_stage(args: argparse.Namespace, only: Sequence[str], sides: Sides, base_python: str, out: Path, *,
                  repro: str, say: Callable[[str], None]) -> dict[str, CheckResult]:
    """Each side's resolve result, {} without a stack (or when --only leaves it out). A stack that does not resolve
    with the baseline's torch (or with any torch) is an infrastructure error, raised: nothing could be installed."""
    stk: stack.Stack = getattr(args, "stack", None) or stack.Stack()
    if not stk or not selected(only, resolve.WORKLOAD, resolve.ASPECT):
        return {}
    device = early_device(args)
    todo, skipped = [], {}
    for role, (spec, prepared) in sides.items():
        if spec is None or prepared or spec.kind == "current":
            skipped[role] = CheckResult(resolve.WORKLOAD, resolve.ASPECT, device, resolve.DTYPE, Outcome.SKIPPED,
                                        reason="a prepared interpreter (or current): nothing is installed into it",
                                        repro=repro)
            continue
        index = resolve.Index(args.index_url or provision.index_for(args.torch_backend, spec, provision.detect_cuda_driver()),
                              tuple(args.extra_index_url), tuple(args.find_links), spec.pre)
        todo.append(resolve.Side(role, spec.requirement, index, spec.text))
    if not todo or todo[-1].role != "candidate":
        return skipped
    logs = out / "logs"
    results = resolve.check(todo, [*args.extra_requirement, *stk.requirements], _pip(base_python, logs), logs,
                            device=device, repro=repro, say=say, env=installer.installer_env("pip"))
    for role, r in results.items():
        if r.outcome is Outcome.ERROR:
            raise InfrastructureError(f"{r.reason} (log: {r.metrics.get('log', logs)}); fix the stack's requirements")
        say(f"{role}: resolve {r.outcome.value}: {r.reason[:300]}")
    return {**skipped, **results}


def with_results(reports: dict[str, Report], results: Mapping[str, CheckResult]) -> dict[str, Report]:
    return {role: replace(r, results=(*r.results, results[role])) if role in results else r for role, r in reports.items()}


def resolve_first(args: argparse.Namespace, only: Sequence[str], sides: Sides, base_python: str, out: Path,
                  reports: dict[str, Report], *, repro: Callable[[str, CheckSpec], str],
                  say: Callable[[str], None]) -> tuple[dict[str, Report], bool]:
    """The reports with each side's resolve result, and whether the run stops here: the candidate's stack does not
    resolve, so nothing is installed for it (the reports are then complete, labelled with the torch resolved)."""
    device = early_device(args)
    results = resolve_stage(args, only, sides, base_python, out, say=say,
                            repro=repro(device, CheckSpec(resolve.WORKLOAD, resolve.ASPECT, device, resolve.DTYPE)))
    reports = with_results(reports, results)
    cand = results.get("candidate")
    if cand is None or cand.outcome is not Outcome.FAILED:
        return reports, False
    return {role: replace(r, finished=session.now(), complete=True, device=device,
                          label=str(results[role].metrics.get("torch", "?")) if role in results else "?")
            for role, r in reports.items()}, True


def installed_stage(args: argparse.Namespace, only: Sequence[str], pythons: Mapping[str, str],
                    reports: dict[str, Report], device: str, *, timeout_s: float, repro: Callable[[CheckSpec], str],
                    say: Callable[[str], None]) -> dict[str, Report]:
    """The reports with each side's imports and abi results, each when it is wanted."""
    labels = {role: r.label for role, r in reports.items()}
    if wanted(args, only, imports.ASPECT):
        results = imports.check(pythons, device=device, timeout_s=min(timeout_s, imports.TIMEOUT_S),
                                repro=repro(CheckSpec(WORKLOAD, imports.ASPECT, device, imports.DTYPE)),
                                baseline_label=labels.get("baseline", ""), say=say)
        for role, r in results.items():
            say(f"{role}: imports {r.outcome.value}: {r.reason[:300]}")
        reports = with_results(reports, results)
    if wanted(args, only, abi.ASPECT):
        envs = {role: abi.Environment({d: (str(v["version"]), list(v["libraries"]))
                                       for d, v in imports.listing(python).items()}) for role, python in pythons.items()}
        results = abi.judge(envs, device=device, labels=labels,
                            repro=repro(CheckSpec(WORKLOAD, abi.ASPECT, device, abi.DTYPE)))
        for role, r in results.items():
            say(f"{role}: abi {r.outcome.value}: {r.reason[:300]}")
        reports = with_results(reports, results)
    return reports
