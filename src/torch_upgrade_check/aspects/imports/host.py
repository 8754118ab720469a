"""The `imports` check: every top-level module of every distribution in each side's environment, imported in a
process of its own with a timeout (no torch here).

The distributions are listed inside the environment under test (importables.py here, importlib.metadata).
Each module is imported by `python -c` in an empty folder with the environment's own paths only (the
orchestrator's PYTHONPATH is dropped, as for the worker), and the process leaves without interpreter teardown
once the import is done: a module is judged on importing. A module that imports on the baseline and raises,
dies of a signal (an extension built for the other libtorch aborts or segfaults) or hangs on the candidate
fails the check, named with its distribution and the error's first line or the signal; so does one the
candidate no longer has, unless the team's pull request removed its distribution from its own requirements (with
the dependencies that went with it): that one is reported, not failed. A module only the candidate's stack has
(a package the pull request adds, or a new dependency) that does not import fails too, named as new in the
candidate's stack, never as failing with the baseline too. Without a baseline, a module that does not import is
suspicious: nothing says it ever did.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from torch_upgrade_check.aspects.imports.judge import ASPECT, Imported, judge_sides
from torch_upgrade_check.hostchecks.context import HostContext, Settings, own_requirements, said, wanted
from torch_upgrade_check.model import CheckResult
from torch_upgrade_check.orchestrate.workers import InfrastructureError

TIMEOUT_S = 120.0  # torch itself imports in seconds; a hang is minutes
LISTER = Path(__file__).resolve().with_name("importables.py")
ERROR_MARK = "torch-upgrade-check-import-error: "
IMPORT = ("import importlib, os, sys\n"
          "try:\n"
          "    importlib.import_module(sys.argv[1])\n"
          "except BaseException as e:\n"
          "    line = next((x.strip() for x in str(e).splitlines() if x.strip()), '')\n"
          f"    print({ERROR_MARK!r} + type(e).__name__ + (': ' + line if line else ''), flush=True)\n"
          "    raise\n"
          "sys.stdout.flush(); sys.stderr.flush()\n"
          "os._exit(0)\n")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env.pop("PYTHONHOME", None)
    return env


def listing(python: str, *, timeout_s: float = TIMEOUT_S) -> dict[str, dict[str, Any]]:
    """{distribution: {"version", "modules", "libraries"}} as the environment of `python` sees them."""
    with tempfile.TemporaryDirectory(prefix="tuc-imports-") as empty:
        try:
            proc = subprocess.run([python, str(LISTER)], capture_output=True, text=True, timeout=timeout_s, cwd=empty,
                                  env=_env(), check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise InfrastructureError(f"cannot list the distributions of {python}: {e}") from None
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise InfrastructureError(f"cannot list the distributions of {python}: {tail[:300]}")
    return dict(json.loads(proc.stdout)["distributions"])


def list_modules(python: str, *, timeout_s: float = TIMEOUT_S) -> dict[str, tuple[str, list[str]]]:
    """{distribution: (version, [top-level modules])} as the environment of `python` sees them."""
    return {name: (str(d["version"]), list(d["modules"])) for name, d in listing(python, timeout_s=timeout_s).items()}


def import_one(python: str, distribution: str, version: str, module: str, *, timeout_s: float, cwd: str) -> Imported:
    started = time.monotonic()
    try:
        proc = subprocess.run([python, "-c", IMPORT, module], capture_output=True, text=True, timeout=timeout_s,
                              cwd=cwd, env=_env(), check=False, start_new_session=True)
    except subprocess.TimeoutExpired:
        return Imported(distribution, version, module, "timeout", f"no import within {timeout_s:g} s",
                        round(time.monotonic() - started, 3))
    except OSError as e:
        return Imported(distribution, version, module, "error", f"cannot start {python}: {e.strerror or e}")
    seconds = round(time.monotonic() - started, 3)
    if proc.returncode == 0:
        return Imported(distribution, version, module, "ok", seconds=seconds)
    if proc.returncode < 0:
        try:
            name = signal.Signals(-proc.returncode).name
        except ValueError:
            name = f"signal {-proc.returncode}"
        return Imported(distribution, version, module, "signal", f"killed by {name}", seconds)
    said = [ln[len(ERROR_MARK):] for ln in proc.stdout.splitlines() if ln.startswith(ERROR_MARK)]
    tail = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip()]
    error = said[-1] if said else (tail[-1] if tail else f"exit code {proc.returncode}")
    return Imported(distribution, version, module, "error", error[:300], seconds)


def _names(requirements: Iterable[str]) -> set[str]:
    """The canonical distribution names of requirement strings; a URL or path line names none."""
    found = set()
    for text in requirements:
        try:
            found.add(canonicalize_name(Requirement(text).name))
        except InvalidRequirement:
            continue
    return found


def removed_by_team(stacks: Mapping[str, Sequence[str]],
                    listings: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> dict[str, str]:
    """{distribution: the requirement it went with}: each distribution the baseline's environment has and the
    candidate's lacks because the team's pull request removed it from its own requirements: the removed one, and
    its dependencies (as the baseline's environment lists them, markers not evaluated) that went too. {} when the
    two sides' stacks are one."""
    if "baseline" not in stacks or "candidate" not in stacks or "baseline" not in listings:
        return {}
    base = {canonicalize_name(d): v for d, v in listings["baseline"].items()}
    kept = {canonicalize_name(d) for d in listings.get("candidate", {})}
    roots = _names(stacks["baseline"]) - _names(stacks["candidate"])
    removed: dict[str, str] = {}
    todo = [(root, root) for root in sorted(roots) if root in base and root not in kept]
    while todo:  # the dependencies reached only through what went: a dependency still installed stops the walk
        name, root = todo.pop()
        if name in removed:
            continue
        removed[name] = root
        todo += [(dep, root) for dep in sorted(_names(base[name].get("requires") or []))
                 if dep in base and dep not in kept and dep not in removed]
    return removed


def import_all(pythons: Mapping[str, str], *, timeout_s: float = TIMEOUT_S, workers: int | None = None,
               say: Callable[[str], None] = print,
               listings: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None) -> dict[str, dict[str, Imported]]:
    """{side: {module: Imported}}: every side's modules, all imports run through one pool (a process each)."""
    listed = ({role: {n: (str(d["version"]), list(d["modules"])) for n, d in listings[role].items()} for role in pythons}
              if listings is not None else {role: list_modules(python) for role, python in pythons.items()})
    jobs = [(role, dist, version, module) for role, dists in listed.items()
            for dist, (version, modules) in sorted(dists.items()) for module in modules]
    say("imports: " + ", ".join(f"{role} {sum(len(m) for _, m in d.values())} modules of {len(d)} distributions"
                                for role, d in listed.items()) + ", each imported in a process of its own")
    done: dict[str, dict[str, Imported]] = {role: {} for role in pythons}
    with tempfile.TemporaryDirectory(prefix="tuc-imports-") as empty, \
            ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 2, thread_name_prefix="imports") as pool:
        futures = [(role, pool.submit(import_one, pythons[role], dist, version, module, timeout_s=timeout_s, cwd=empty))
                   for role, dist, version, module in jobs]
        for role, future in futures:
            result = future.result()
            done[role].setdefault(result.module, result)  # a module two distributions ship is imported once a side
    return done


def check(pythons: Mapping[str, str], *, device: str, repro: str, timeout_s: float = TIMEOUT_S,
          baseline_label: str = "", say: Callable[[str], None] = print,
          listings: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None,
          removed: Mapping[str, str] | None = None) -> dict[str, CheckResult]:
    started = time.monotonic()
    done = import_all(pythons, timeout_s=timeout_s, say=say, listings=listings)
    return judge_sides(done, device=device, repro=repro, seconds=time.monotonic() - started, baseline_label=baseline_label,
                 removed=removed)



# The hooks commands/stack_checks reaches through the row (Stage.INSTALLED).

def planned(settings: Settings, only: Sequence[str]) -> bool:
    """With a stack (unless --only leaves imports out), or without one when --only asks for it."""
    return wanted(settings, only, ASPECT)


def installed(context: HostContext) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """Each side's installed distributions (listing) and those the team's pull request removed (removed_by_team):
    read once a run, by the first of imports and abi that runs, which both judge with them."""
    def read() -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
        listings = {role: listing(python) for role, python in context.pythons.items()}
        removed = removed_by_team(own_requirements(context.settings), listings)
        if removed:
            context.say(f"imports, abi: {len(removed)} distributions the baseline has are removed by the team's pull "
                        f"request (its requirements drop {', '.join(sorted(set(removed.values())))}): reported, not "
                        "failed")
        return listings, removed

    return context.once("installed", read)


def on_host(context: HostContext) -> dict[str, CheckResult]:
    """Each side's imports result, every top-level module of its stack imported in a process of its own."""
    listings, removed = installed(context)
    results = check(context.pythons, device=context.device, timeout_s=min(context.timeout_s, TIMEOUT_S),
                    repro=context.repro_of(ASPECT), baseline_label=context.labels.get("baseline", ""),
                    say=context.say, listings=listings, removed=removed)
    return said(results, ASPECT, context.say)
