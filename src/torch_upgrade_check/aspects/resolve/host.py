"""The `resolve` check: each side's stack resolved by pip's dry run before anything is installed (no torch).

`pip install --dry-run --ignore-installed --report FILE <side's torch> <stack>` resolves from the index's
metadata (PEP 658 files where the index serves them, as PyPI and PyTorch's index do; a local wheel's own
metadata), so a conflict is found before a multi-GB torch is downloaded. pip's JSON report is read, never its
text: on success it lists every package with its metadata; a failed resolution writes no report, so the
culprit is found from a resolution that works (the baseline's, or the stack with any torch), by asking each
package's `Requires-Dist` on torch whether it accepts the candidate, and the candidate torch's own
requirements whether the stack's pins satisfy them. For each package that refuses the candidate, one more
dry run (the candidate torch and that package alone) names the newest release of it that accepts it.

Each side resolves its own stack (read at its git ref by commands/stack_checks): a pull request that bumps torch and
torchvision together resolves the baseline's torchvision with the baseline's torch. What changed between the
two resolutions is listed in two parts: the packages whose requirements the team changed, and those the
resolver moved unasked.

A side whose torch itself is not on its index (a typo, a CUDA variant the backend lacks) is named as such, before
any package is blamed: torch alone (`--no-deps`) is resolved again, and when the index has no such torch the side's
result is an error naming the version and the index (metrics `torch_absent`, exit 2: the team's input). A
companion with no release for the candidate's torch names its newest release and the torch that one requires.

A conflict that only the candidate's torch causes fails the check (exit 1, kind correctness). A stack that
does not resolve on its own side (the baseline's with its torch, the candidate's with any torch) is the team's
file (exit 2, commands/stack_checks names it); a dry run that timed out or could not reach the index is the runner's
(`Resolution.runner`, exit 3).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from torch_upgrade_check.aspects._stack import DTYPE, WORKLOAD
from torch_upgrade_check.aspects.resolve.judge import (  # noqa: F401 (the check's names)
    ASPECT,
    Metrics,
    changes,
    pinned_by_team,
    refusals,
    refused,
    resolved,
    split_changes,
    unmet_by_stack,
)
from torch_upgrade_check.hostchecks.context import HostContext, Settings, said, selected
from torch_upgrade_check.model import CheckResult, Outcome
from torch_upgrade_check.orchestrate import installer, provision
from torch_upgrade_check.orchestrate.workers import InfrastructureError

TIMEOUT_S = 600  # a resolution that backtracks through many releases of a package takes minutes


@dataclass(frozen=True)
class Index:
    """Where a side's packages come from, for a dry run: torch's index (PyTorch's, or "" for the configured one)
    is an extra index here, beside the configured one: a dry run installs nothing, so it may read both."""

    torch_index: str = ""
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    pre: bool = False

    def name(self) -> str:
        """The index a side's torch comes from, as a message names it."""
        return self.torch_index or "PyPI (or the index pip is configured with)"

    def options(self) -> list[str]:
        opts = ["--extra-index-url", self.torch_index] if self.torch_index else []
        for url in self.extra_index_urls:
            opts += ["--extra-index-url", url]
        for link in self.find_links:
            opts += ["--find-links", link]
        return opts + (["--pre"] if self.pre else [])


@dataclass(frozen=True)
class Resolution:
    """One dry run: the packages it picked (name -> version, with their metadata), or pip's one-line reason."""

    ok: bool
    versions: dict[str, str] = field(default_factory=dict)
    requires: dict[str, list[Requirement]] = field(default_factory=dict)  # the requirements whose markers hold
    reason: str = ""
    log: Path | None = None
    runner: bool = False  # the failure is the runner's (pip timed out, could not start, could not reach an index)


# What pip logs when the index cannot be read: the runner's network, not the team's requirements
NETWORK = ("NewConnectionError", "Max retries exceeded", "Temporary failure in name resolution", "ConnectTimeout",
           "ReadTimeout", "Read timed out", "SSLError", "ProxyError", "Connection refused", "Connection reset",
           "Network is unreachable", "HTTP error 5", "503 Service Unavailable", "502 Bad Gateway")


def runner_caused(log: Path) -> bool:
    """Whether a failed dry run's log shows the index unreachable (pip retries, then says no version was found)."""
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return True
    return any(marker in text for marker in NETWORK)


def dry_run(pip: Sequence[str], requirements: Sequence[str], index: Index, *, log: Path, no_deps: bool = False,
            env: Mapping[str, str] | None = None) -> Resolution:
    """Resolve `requirements` with pip's dry run; its JSON report read into a Resolution."""
    log.parent.mkdir(parents=True, exist_ok=True)
    report = log.with_suffix(".json")
    report.unlink(missing_ok=True)
    cmd = [*pip, "install", "--dry-run", "--ignore-installed", "--disable-pip-version-check", "--report", str(report),
           *(["--no-deps"] if no_deps else []), *index.options(), *requirements]
    with log.open("a", encoding="utf-8") as f:
        f.write(f"$ {' '.join(cmd)}\n")
        f.flush()
        try:
            proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=TIMEOUT_S, check=False,
                                  env=None if env is None else dict(env))
        except subprocess.TimeoutExpired:
            return Resolution(False, reason=f"pip's dry run took over {TIMEOUT_S} s and was stopped", log=log,
                              runner=True)
        except OSError as e:
            return Resolution(False, reason=f"pip could not start: {e.strerror or e}", log=log, runner=True)
    if proc.returncode != 0 or not report.exists():
        return Resolution(False, reason=installer.installer_message(log), log=log, runner=runner_caused(log))
    return read_report(json.loads(report.read_text(encoding="utf-8")), log)


def read_report(data: Mapping[str, Any], log: Path | None = None) -> Resolution:
    """pip's installation report (format version 1) -> a Resolution; markers evaluated in the report's environment."""
    environment = {k: str(v) for k, v in (data.get("environment") or {}).items()}
    versions: dict[str, str] = {}
    requires: dict[str, list[Requirement]] = {}
    for item in data.get("install", []):
        meta = item.get("metadata") or {}
        name = canonicalize_name(str(meta.get("name", "")))
        versions[name] = str(meta.get("version", ""))
        extras = [""] + list(item.get("requested_extras") or [])
        kept = []
        for text in meta.get("requires_dist") or []:
            try:
                req = Requirement(text)
            except InvalidRequirement:
                continue
            if req.marker is None or any(req.marker.evaluate({**environment, "extra": e}) for e in extras):
                kept.append(req)
        requires[name] = kept
    return Resolution(True, versions, requires, log=log)


# pip's words when the index offers no torch of that version (or a constraint pip is configured with rules it out)
ABSENT = ("No matching distribution found", "Could not find a version that satisfies",
          "conflicting dependencies")


def torch_absent(pip: Sequence[str], requirement: str, label: str, index: Index, log: Path, *,
                 env: Mapping[str, str] | None = None) -> str | None:
    """The index's answer when it has no torch for `requirement` (torch alone, without its dependencies): a line naming
    the version and the index with pip's own reason; None when it has one, or when pip could not ask (the runner's)."""
    got = dry_run(pip, [requirement], index, log=log, no_deps=True, env=env)
    if got.ok or got.runner or not any(words in got.reason for words in ABSENT):
        return None  # there, or pip failed another way (a broken wheel of a build that is there: an install failure)
    return f"torch {label} is not on {index.name()}: {got.reason}"


def newest_release(pip: Sequence[str], name: str, index: Index, log: Path, *,
                   env: Mapping[str, str] | None = None) -> str:
    """`the newest, NAME VERSION, requires torch...`: what a companion's newest release asks of torch, from the index."""
    got = dry_run(pip, [name], index, log=log, no_deps=True, env=env)
    version = got.versions.get(canonicalize_name(name)) if got.ok else None
    if not version:
        return f"the index lists no {name} release pip can read ({got.reason})"
    torch = [f"torch{r.specifier}" for r in got.requires.get(canonicalize_name(name), [])
             if canonicalize_name(r.name) == "torch"]
    return f"the newest, {name} {version}, requires {' and '.join(torch) or 'no torch'}"


@dataclass(frozen=True)
class Side:
    """One side to resolve: its torch requirement (`torch==2.14.1`), where its packages come from, and its own
    stack (read at its git ref; None: the stack `check` is given)."""

    role: str
    requirement: str
    index: Index
    label: str  # the torch as the user gave it: 2.14.1, nightly, '>=2.13,<2.14'
    stack: tuple[str, ...] | None = None


def check(sides: Sequence[Side], stack: Sequence[str], pip: Sequence[str], logs: Path, *, device: str,
          repro: str, say: Callable[[str], None] = print, env: Mapping[str, str] | None = None) -> dict[str, CheckResult]:
    """Each side's `stack[-]/resolve` result; the candidate's judged against the baseline's resolution (the last
    side is the candidate, an earlier one the baseline). Each side resolves its own stack (Side.stack, else
    `stack`). Raises nothing: pip's failures become results."""
    started = time.monotonic()
    done: dict[str, Resolution] = {}
    own = {side.role: tuple(stack if side.stack is None else side.stack) for side in sides}
    for side in sides:
        say(f"{side.role}: resolving the stack with torch {side.label} (pip's dry run, index metadata only)")
        done[side.role] = dry_run(pip, [side.requirement, *own[side.role]], side.index,
                                  log=logs / f"resolve-{side.role}.log", env=env)
    results: dict[str, CheckResult] = {}
    # a side whose torch is not on its index at all: named as such, before any package is blamed for it
    missing = {side.role: why for side in sides if not done[side.role].ok and not done[side.role].runner
               and (why := torch_absent(pip, side.requirement, side.label, side.index,
                                        logs / f"resolve-torch-{side.role}.log", env=env))}

    def result(role: str, outcome: Outcome, reason: str, metrics: dict[str, Any], details: str = "") -> CheckResult:
        return CheckResult(WORKLOAD, ASPECT, device, DTYPE, outcome, reason=reason, metrics=metrics, details=details,
                           duration_s=round(time.monotonic() - started, 3), repro=repro)

    *earlier, cand = sides
    base = earlier[-1] if earlier else None
    if base is not None:
        b = done[base.role]
        torch_b = b.versions.get("torch", base.label)
        results[base.role] = (result(base.role, Outcome.ERROR, missing[base.role],
                                     {"log": str(b.log), "runner": False, "torch_absent": True})
                              if base.role in missing else
                              result(base.role, Outcome.PASSED, f"the stack resolves with torch {torch_b} "
                                     f"({len(b.versions)} packages)", {"torch": torch_b, "packages": b.versions})
                              if b.ok else
                              result(base.role, Outcome.ERROR, f"the stack does not resolve with torch {base.label}: "
                                     f"{b.reason}", {"log": str(b.log), "runner": b.runner}))
    c = done[cand.role]
    if cand.role in missing:
        results[cand.role] = result(cand.role, Outcome.ERROR, missing[cand.role],
                                    {"log": str(c.log), "runner": False, "torch_absent": True})
        return results
    reference = done[base.role] if base is not None else None
    if c.ok:
        team = pinned_by_team(own[base.role], own[cand.role]) if base is not None else set()
        compared = reference.versions if reference is not None and reference.ok else None
        reason, metrics, details = resolved(c.versions.get("torch", cand.label), c.versions, compared, team)
        results[cand.role] = result(cand.role, Outcome.PASSED, reason, metrics, details)
        return results
    if reference is None or not reference.ok or (base is not None and own[base.role] != own[cand.role]):
        # no baseline resolution of this same stack to learn from: the candidate's stack with any torch the index has
        reference = dry_run(pip, ["torch", *own[cand.role]], cand.index, log=logs / "resolve-reference.log", env=env)
        if not reference.ok:  # not the candidate's doing: the stack does not resolve at all
            why = f"the stack does not resolve with any torch: {reference.reason}"
            results[cand.role] = result(cand.role, Outcome.ERROR, why, {"log": str(reference.log),
                                                                         "runner": reference.runner or c.runner})
            return results
    if c.runner:  # pip could not read the index (or ran out of time): nothing is known of the candidate's stack
        results[cand.role] = result(cand.role, Outcome.ERROR, f"the stack could not be resolved with torch "
                                    f"{cand.label}: {c.reason}", {"log": str(c.log), "runner": True})
        return results
    torch_meta = dry_run(pip, [cand.requirement], cand.index, log=logs / "resolve-torch.log", no_deps=True, env=env)
    version = torch_meta.versions.get("torch", cand.label)
    lines = [f"{name} {have} requires {req}" for name, have, req in refusals(reference, version)]
    lines += [f"torch {version} requires {theirs}; the stack asks {mine}"
              for _, mine, theirs in unmet_by_stack(torch_meta, own[cand.role])]
    fixes = []
    for name, _, _ in refusals(reference, version):
        fit = dry_run(pip, [cand.requirement, name], cand.index, log=logs / f"resolve-{name}.log", env=env)
        fixes.append(f"{name} {fit.versions[name]} accepts torch {version}" if fit.ok and name in fit.versions
                     else f"no {name} release on the index accepts torch {version}: "
                          + newest_release(pip, name, cand.index, logs / f"resolve-{name}-newest.log", env=env))
    reason, metrics, details = refused(version, lines, fixes, c.reason, str(c.log))
    results[cand.role] = result(cand.role, Outcome.FAILED, reason, metrics, details)
    return results


# The hooks commands/stack_checks reaches through the row (Stage.BEFORE_INSTALL): when resolve is planned, its check
# on each side's own stack, what a side that does not resolve means for the run, and whether a side's torch is there.

# what the check does to each side's torch, as the line stopping a comparison of one torch with itself says it (each
# side's result holds the torch in metrics["torch"]): "... but both sides resolve torch 2.14.1"
VERB = "resolve"


def planned(settings: Settings, only: Sequence[str]) -> bool:
    """--list shows resolve with a stack, unless --only leaves it out."""
    return bool(settings.stack) and selected(only, ASPECT)


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


def side_index(s: Settings, spec: provision.TorchSpec) -> Index:
    """Where a side's torch comes from (its backend's index, or --index-url), for a dry run."""
    return Index(s.index_url or provision.index_for(s.torch_backend, spec, provision.detect_cuda_driver()),
                 s.extra_index_url, s.find_links, spec.pre)


def on_host(context: HostContext) -> dict[str, CheckResult]:
    """Each side's resolve result ({} without a stack, or when --only leaves it out), each side resolving its own
    stack (s.stacks); a prepared interpreter (or current) is skipped: nothing is installed into it."""
    s, say = context.settings, context.say
    stacks, stk = s.stacks, s.stack
    if not (stk or any(stacks.values())) or not selected(context.only, ASPECT):
        return {}
    device, repro = context.device, context.repro_of(ASPECT)
    todo, skipped = [], {}
    for role, (spec, prepared) in context.sides.items():
        if spec is None or prepared or spec.kind == "current":
            skipped[role] = CheckResult(WORKLOAD, ASPECT, device, DTYPE, Outcome.SKIPPED,
                                        reason="a prepared interpreter (or current): nothing is installed into it",
                                        repro=repro)
            continue
        own = stacks.get(role, stk)
        todo.append(Side(role, spec.requirement, side_index(s, spec), spec.text, (*s.extra_requirement, *own.requirements)))
    if not todo or todo[-1].role != "candidate":
        return skipped
    logs = context.out / "logs"
    results = check(todo, [*s.extra_requirement, *stk.requirements], _pip(context.base_python, logs), logs,
                    device=device, repro=repro, say=say, env=installer.installer_env("pip"))
    return {**skipped, **said(results, ASPECT, say)}


def blocking(role: str, r: CheckResult, files: str, logs: Path) -> tuple[str, bool]:
    """What a side's resolve error (`files`: its stack's files and where they were read) means for the run: the line
    that stops it, and whether it is the runner's doing (pip timed out or could not reach the index: exit 3), not
    the team's (a torch its index lacks, a stack that does not resolve: exit 2)."""
    m = Metrics.from_dict(r.metrics)
    log = m.log if m.has("log") else logs
    if m.torch_absent:  # the index's answer, named: the side's torch version is not there
        return (f"the {role}'s {r.reason} (log: {log}); pass a torch version that index has, or the "
                "--torch-backend (or --index-url) that has this one", False)
    if m.runner:
        return (f"{r.reason} (log: {log}); pip could not finish: check the runner's network and index, then "
                "run again", True)
    fix = ("fix those files there, or pass --baseline VERSION with the torch they do install with"
           if role == "baseline" else "fix those files (the pull request's)")
    return f"the {role}'s stack ({files}) cannot be installed: {r.reason} (log: {log}); {fix}", False


def torch_not_on_index(s: Settings, sides: Mapping[str, tuple[provision.TorchSpec | None, str | None]],
                       base_python: str, out: Path) -> str | None:
    """After an install failed: the line naming a side's torch version that its index does not have (the team's
    input: exit 2), from pip's dry run of torch alone; None when each side's torch is there (or pip cannot ask)."""
    for role, (spec, prepared) in sides.items():
        if spec is None or prepared or spec.kind == "current":
            continue
        try:
            pip = _pip(base_python, out / "logs")
        except InfrastructureError:
            return None
        why = torch_absent(pip, spec.requirement, spec.text, side_index(s, spec),
                           out / "logs" / f"torch-on-index-{role}.log", env=installer.installer_env("pip"))
        if why:
            return (f"the {role}'s {why}; pass a torch version that index has, or the --torch-backend (or --index-url) "
                    "that has this one")
    return None
