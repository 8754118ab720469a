"""The `api` check: the torch names the team's Python files use, asked of each side's torch (no torch here).

The scan is pure `ast`: every `torch.…` attribute chain, through the file's import aliases (`import torch.nn.functional
as F`, `from torch import nn`, `from torch._dynamo import config`), names imported `from torch… import name`, and config
keys passed to a torch `config.patch(key=…)` / `config.patch("key", …)` / `config.patch({"key": …})`. Each name is kept
once with every `file:line` that uses it. apinames.py answers, in each side's environment, whether the name
exists there, its parameters, and whether reaching it warns. A name the baseline has and the candidate lacks fails,
named with its first uses; a name that newly warns a DeprecationWarning/FutureWarning on the candidate, or whose
parameters lost one the baseline had, is suspicious (passes with a warning). A name neither side has is the team's
own (a typo, or a name built at run time): reported, never failed. Without a baseline, names the torch lacks are
suspicious: nothing says they ever existed. A name the candidate lacks whose every use the team's code guards (a try
body falling back on ImportError/AttributeError, a hasattr branch, getattr with a default, a torch-version branch:
host_guards.py) is the team's own handling: suspicious, each use named with its guard; one unguarded use fails it.

TorchFix (`torchfix`, PyTorch's linter of deprecated and removed APIs) is run over the same files for what it already
knows and a live probe cannot see: a call of a function torch removed (TOR001/TOR004: the check is suspicious, since
the code breaks when it reaches it, whichever side), and its advice (deprecated functions, `torch.load` without
`weights_only`, `checkpoint` without `use_reentrant`, ...) listed on the result without changing it. Where TorchFix is
not installed or fails, the result says so and stands on the probe alone. It reads only the files one of its rules
could match, in parallel processes (host_lint.py). The rule is judge.py's.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from torch_upgrade_check.analysis.closeness import plural_of
from torch_upgrade_check.aspects._stack import DTYPE, WORKLOAD
from torch_upgrade_check.aspects.api import host_guards as apiguards
from torch_upgrade_check.aspects.api import host_lint as lint
from torch_upgrade_check.aspects.api.host_lint import Advice, parse_torchfix, shown_path, with_advice  # noqa: F401 (the api check's API)
from torch_upgrade_check.aspects.api.judge import (  # noqa: F401 (the check's names)
    ASPECT,
    Findings,
    Guards,
    Scanned,
    Uses,
    compare_answers,
    guarded_only,
    judge_sides,
)
from torch_upgrade_check.errors import UsageError
from torch_upgrade_check.hostchecks.context import HostContext, Settings, said, selected
from torch_upgrade_check.model import CheckResult, Outcome
from torch_upgrade_check.orchestrate.workers import InfrastructureError, worker_env
from torch_upgrade_check.schema import API_NAMES_KIND as KIND
from torch_upgrade_check.schema import API_NAMES_VERSION as SCHEMA_VERSION

TIMEOUT_S = 180.0  # one process a side imports torch and reaches each name (torch._dynamo's config takes seconds)
SKIPPED_DIRS = {".git", ".venv", "venv", "__pycache__", "node_modules", ".tox", "build", "dist"}

def _chain(node: ast.AST) -> list[str] | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(parts)]


def _aliases(tree: ast.Module) -> dict[str, str]:
    """{local name: dotted torch name} from the file's imports, wherever they are (module, function or class)."""
    found: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "torch" or a.name.startswith("torch."):
                    if a.asname:
                        found[a.asname] = a.name
                    else:
                        found["torch"] = "torch"
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and (
                node.module == "torch" or node.module.startswith("torch.")):
            for a in node.names:
                if a.name != "*":
                    found[a.asname or a.name] = f"{node.module}.{a.name}"
    return found


def scan_source(source: str, filename: str) -> Scanned:
    """The torch names one file uses, each with its `filename:LINE`s, and which of those uses are guarded; a file
    that does not parse is scanned as nothing."""
    try:
        tree = ast.parse(source, filename=filename)
    except (SyntaxError, ValueError):
        return Scanned({}, {})
    aliases = _aliases(tree)
    up = apiguards.parents(tree)
    uses: Uses = {}
    guards: Guards = {}
    unguarded: set[tuple[str, str]] = set()  # a line with one unguarded use of a name is not guarded for it

    def resolve(node: ast.AST) -> str | None:
        chain = _chain(node)
        return ".".join([aliases[chain[0]], *chain[1:]]) if chain and chain[0] in aliases else None

    def add(name: str, node: ast.AST, guard: str | None = None) -> None:
        where = f"{filename}:{node.lineno}"
        if where not in uses.setdefault(name, []):
            uses[name].append(where)
        guard = guard or apiguards.guard_of(node, name, up, resolve)
        if guard and (name, where) not in unguarded:
            guards.setdefault(name, {}).setdefault(where, guard)
        else:
            unguarded.add((name, where))
            guards.get(name, {}).pop(where, None)

    inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and (
                node.module == "torch" or node.module.startswith("torch.")):
            for a in node.names:
                add(node.module if a.name == "*" else f"{node.module}.{a.name}", node)
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("torch."):
                    add(a.name, node)
        elif isinstance(node, ast.Attribute) and id(node) not in inner:
            name = resolve(node)
            if name:
                add(name, node)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
            got = _getattr_name(node, resolve)
            if got:  # getattr(torch.x, "name") reaches torch.x.name; with a default, the team handles its absence
                add(got, node, "getattr with a default" if len(node.args) >= 3 else None)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "patch":
            config = resolve(node.func.value)
            if not config or not config.endswith("config"):
                continue
            keys = [k.arg for k in node.keywords if k.arg]
            if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                keys.append(node.args[0].value)
            if node.args and isinstance(node.args[0], ast.Dict):
                keys += [k.value for k in node.args[0].keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
            for key in keys:
                add(f"{config}.{key}", node)
    return Scanned(uses, {n: g for n, g in guards.items() if g})


def _getattr_name(node: ast.Call, resolve: Callable[[ast.AST], str | None]) -> str | None:
    if len(node.args) < 2 or not isinstance(node.args[1], ast.Constant) or not isinstance(node.args[1].value, str):
        return None
    owner = resolve(node.args[0]) if isinstance(node.args[0], (ast.Name, ast.Attribute)) else None
    return f"{owner}.{node.args[1].value}" if owner and node.args[1].value.isidentifier() else None


def python_files(roots: Iterable[str]) -> list[Path]:
    """Every .py file under the roots (a root may be a file), leaving out venvs, caches and VCS folders."""
    files: list[Path] = []
    for root in roots:
        path = Path(root)
        if path.is_file():
            files.append(path)
            continue
        for folder, dirs, names in os.walk(path):
            dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS and not d.startswith("."))
            files += [Path(folder) / n for n in sorted(names) if n.endswith(".py")]
    return files


def check_roots(roots: Sequence[str], option: str = "--scan") -> list[str]:
    """The roots as given, each one that does not exist a UsageError naming it (all of them together)."""
    problems = [f"{option} {root!r}: no such file or folder; pass a folder of your Python code (like src) or a .py file"
                for root in roots if not Path(root).exists()]
    if problems:
        raise UsageError(*problems)
    return list(roots)


def torchfix(roots: Sequence[str], *, timeout_s: float = lint.TORCHFIX_TIMEOUT_S) -> tuple[list[Advice], str]:
    """TorchFix's findings over the scan's files (the files, not the roots, so that it never lints a venv under
    them), and a note when it did not run or failed (host_lint.py)."""
    return lint.torchfix(python_files(roots), timeout_s=timeout_s)


def scan(roots: Iterable[str], *, relative_to: Path | None = None) -> Scanned:
    """Every .py file's scan under the roots, each name's uses merged (files named relative to `relative_to`)."""
    base = (relative_to or Path.cwd()).resolve()
    uses: Uses = {}
    guards: Guards = {}
    for path in python_files(roots):
        shown = shown_path(path, base)
        try:
            source = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        found = scan_source(source, shown)
        for name, where in found.uses.items():
            uses.setdefault(name, []).extend(w for w in where if w not in uses[name])
        for name, guarded in found.guards.items():
            guards.setdefault(name, {}).update(guarded)
    return Scanned(dict(sorted(uses.items())), dict(sorted(guards.items())))


def ask(python: str, names: Sequence[str], *, timeout_s: float = TIMEOUT_S) -> dict[str, Any]:
    """apinames.py's answer for `names` in the environment of `python`: {"torch", "names": {name: {...}}}."""
    request = json.dumps({"kind": KIND, "schema_version": SCHEMA_VERSION, "names": list(names)})
    with tempfile.TemporaryDirectory(prefix="tuc-api-") as empty:
        try:
            proc = subprocess.run([python, "-m", "torch_upgrade_check.aspects.api.apinames"], input=request,
                                  capture_output=True, text=True, timeout=timeout_s, cwd=empty, env=worker_env(),
                                  check=False, start_new_session=True)
        except subprocess.TimeoutExpired:
            raise InfrastructureError(f"the api check's names were not answered by {python} within {timeout_s:g} s") from None
        except OSError as e:
            raise InfrastructureError(f"cannot start {python} for the api check: {e}") from None
    tail = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
    if proc.returncode != 0:
        raise InfrastructureError(f"the api check's answer from {python} failed: {tail[:300]}")
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise InfrastructureError(f"the api check's answer from {python} is not JSON: {tail[:300]}") from None
    if doc.get("kind") != KIND or doc.get("schema_version") != SCHEMA_VERSION:
        raise InfrastructureError(f"the api check's answer from {python} is {doc.get('kind')!r} version "
                                  f"{doc.get('schema_version')!r}, not {KIND} version {SCHEMA_VERSION}")
    return doc


def check(pythons: Mapping[str, str], roots: Sequence[str], *, device: str, repro: str, timeout_s: float = TIMEOUT_S,
          baseline_label: str = "", say: Callable[[str], None] = print) -> dict[str, CheckResult]:
    started = time.monotonic()
    scanned = scan(roots)
    uses = scanned.uses
    files = plural_of(len(python_files(roots)), "Python file")
    say(f"api: {plural_of(len(uses), 'torch name')} in {files} under {', '.join(roots)}, asked of "
        + ", ".join(pythons))
    if not uses:
        return {role: CheckResult(WORKLOAD, ASPECT, device, DTYPE, Outcome.SKIPPED,
                                  reason=f"no torch name used in the Python files under {', '.join(roots)}", repro=repro)
                for role in pythons}
    answers, errors = {}, {}
    with ThreadPoolExecutor(max_workers=len(pythons) + 1, thread_name_prefix="api") as pool:  # all three overlap
        futures = {role: pool.submit(ask, python, list(uses), timeout_s=timeout_s) for role, python in pythons.items()}
        linted = pool.submit(torchfix, roots, timeout_s=timeout_s)  # the check's own limit, as the names'
    advice, note = linted.result()
    for role, future in futures.items():
        try:
            answers[role] = future.result()
        except InfrastructureError as e:  # this check's error, on this side; every other result stands
            errors[role] = CheckResult(WORKLOAD, ASPECT, device, DTYPE, Outcome.ERROR, reason=str(e),
                                       metrics={"uses": uses}, duration_s=round(time.monotonic() - started, 3),
                                       repro=repro)
    if "candidate" not in answers:
        return {**{role: judge_sides(uses, {"candidate": a}, device=device, repro=repro, guards=scanned.guards)["candidate"]
                   for role, a in answers.items()}, **errors}
    if "baseline" in errors:
        answers.pop("baseline", None)
    judged = judge_sides(uses, answers, device=device, repro=repro, seconds=time.monotonic() - started,
                   baseline_label=baseline_label, guards=scanned.guards)
    judged["candidate"] = with_advice(judged["candidate"], advice, note)
    return {**judged, **errors}


# The hooks commands/stack_checks reaches through the row (Stage.INSTALLED).

def scan_roots(s: Settings, only: Sequence[str]) -> list[str]:
    """What the api check scans: the --scan paths, or, when --only asks for api, the python-path folders (--python-path
    and the config's); none (no api check) otherwise, or when --only leaves api out."""
    if not selected(only, ASPECT):
        return []
    if s.scan:
        return check_roots(s.scan)
    if not only:
        return []
    return [*(s.cfg.resolved_python_path() if s.cfg is not None else []), *(str(Path(p).resolve()) for p in s.python_path)]


def planned(settings: Settings, only: Sequence[str]) -> bool:
    """With a path to scan: --scan, or --only naming api (a --scan path that does not exist: exit 2, UsageError)."""
    return bool(scan_roots(settings, only))


def on_host(context: HostContext) -> dict[str, CheckResult]:
    """Each side's api result: the torch names the scanned files use, asked of each side's torch."""
    roots = scan_roots(context.settings, context.only)
    if not roots:
        return {}
    results = check(context.pythons, roots, device=context.device, timeout_s=max(context.timeout_s, TIMEOUT_S),
                    repro=context.repro_of(ASPECT), baseline_label=context.labels.get("baseline", ""), say=context.say)
    return said(results, ASPECT, context.say)
