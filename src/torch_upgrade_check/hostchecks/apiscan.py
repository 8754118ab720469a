"""The `api` check: the torch names the team's Python files use, asked of each side's torch (no torch here).

The scan is pure `ast`: every `torch.…` attribute chain, through the file's import aliases (`import torch.nn.functional
as F`, `from torch import nn`, `from torch._dynamo import config`), names imported `from torch… import name`, and config
keys passed to a torch `config.patch(key=…)` / `config.patch("key", …)` / `config.patch({"key": …})`. Each name is kept
once with every `file:line` that uses it. worker/apinames.py answers, in each side's environment, whether the name
exists there, its parameters, and whether reaching it warns. A name the baseline has and the candidate lacks fails,
named with its first uses; a name that newly warns a DeprecationWarning/FutureWarning on the candidate, or whose
parameters lost one the baseline had, is suspicious (passes with a warning). A name neither side has is the team's
own (a typo, or a name built at run time): reported, never failed. Without a baseline, names the torch lacks are
suspicious: nothing says they ever existed.

TorchFix (`torchfix`, PyTorch's linter of deprecated and removed APIs) is run over the same files for what it already
knows and a live probe cannot see: a call of a function torch removed (TOR001/TOR004: the check is suspicious, since
the code breaks when it reaches it, whichever side), and its advice (deprecated functions, `torch.load` without
`weights_only`, `checkpoint` without `use_reentrant`, ...) listed on the result without changing it. Where TorchFix is
not installed or fails, the result says so and stands on the probe alone.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from torch_upgrade_check.analysis.closeness import plural_of
from torch_upgrade_check.errors import UsageError
from torch_upgrade_check.model import CheckResult, Outcome
from torch_upgrade_check.orchestrate.workers import InfrastructureError, worker_env
from torch_upgrade_check.schema import API_NAMES_KIND as KIND
from torch_upgrade_check.schema import API_NAMES_VERSION as SCHEMA_VERSION

ASPECT = "api"
WORKLOAD = "stack"
DTYPE = "-"
TIMEOUT_S = 180.0  # one process a side imports torch and reaches each name (torch._dynamo's config takes seconds)
LISTED = 5
SHOWN_USES = 3
SKIPPED_DIRS = {".git", ".venv", "venv", "__pycache__", "node_modules", ".tox", "build", "dist"}
TORCHFIX_TIMEOUT_S = 120.0
TORCHFIX_REMOVED = ("TOR001", "TOR004")  # "Use of removed function", "Import of removed function"
TORCHFIX_LINE = re.compile(r"^(?P<file>.+?):(?P<line>\d+):\d+: (?P<code>TOR\d{3}) (?P<message>.*)$")

Uses = dict[str, list[str]]  # dotted torch name -> ["file.py:LINE", ...]


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


def scan_source(source: str, filename: str) -> Uses:
    """{torch name: [filename:LINE, ...]} one file uses; a file that does not parse is scanned as nothing."""
    try:
        tree = ast.parse(source, filename=filename)
    except (SyntaxError, ValueError):
        return {}
    aliases = _aliases(tree)
    uses: Uses = {}

    def add(name: str, line: int) -> None:
        where = f"{filename}:{line}"
        if where not in uses.setdefault(name, []):
            uses[name].append(where)

    inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and (
                node.module == "torch" or node.module.startswith("torch.")):
            for a in node.names:
                add(node.module if a.name == "*" else f"{node.module}.{a.name}", node.lineno)
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("torch."):
                    add(a.name, node.lineno)
        elif isinstance(node, ast.Attribute) and id(node) not in inner:
            chain = _chain(node)
            if chain and chain[0] in aliases:
                add(".".join([aliases[chain[0]], *chain[1:]]), node.lineno)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "patch":
            receiver = _chain(node.func.value)
            if not receiver or receiver[0] not in aliases:
                continue
            config = ".".join([aliases[receiver[0]], *receiver[1:]])
            if not config.endswith("config"):
                continue
            keys = [k.arg for k in node.keywords if k.arg]
            if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                keys.append(node.args[0].value)
            if node.args and isinstance(node.args[0], ast.Dict):
                keys += [k.value for k in node.args[0].keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
            for key in keys:
                add(f"{config}.{key}", node.lineno)
    return uses


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


def _shown_path(path: Path, base: Path) -> str:
    resolved = path.resolve()
    return str(resolved.relative_to(base)) if resolved.is_relative_to(base) else str(path)


def scan(roots: Iterable[str], *, relative_to: Path | None = None) -> Uses:
    """{torch name: [file:LINE, ...]} over every .py file under the roots, files named relative to `relative_to`."""
    base = (relative_to or Path.cwd()).resolve()
    uses: Uses = {}
    for path in python_files(roots):
        shown = _shown_path(path, base)
        try:
            source = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for name, where in scan_source(source, shown).items():
            uses.setdefault(name, []).extend(w for w in where if w not in uses[name])
    return dict(sorted(uses.items()))


@dataclass(frozen=True)
class Advice:
    """One TorchFix finding: its rule, where, and what it says."""

    code: str
    where: str
    message: str

    @property
    def removed(self) -> bool:
        return self.code in TORCHFIX_REMOVED

    def line(self) -> str:
        return f"{self.code} at {self.where}: {self.message}"


def parse_torchfix(output: str, *, relative_to: Path | None = None) -> list[Advice]:
    """TorchFix's `file:LINE:COL: TORnnn message` lines (its diffs and totals are left out), files named as the scan
    names them."""
    base = (relative_to or Path.cwd()).resolve()
    found = []
    for line in output.splitlines():
        m = TORCHFIX_LINE.match(line)
        if m:
            where = f"{_shown_path(Path(m['file']), base)}:{m['line']}"
            message = m["message"].strip().removeprefix("[*] ")  # TorchFix's mark of what its --fix rewrites
            found.append(Advice(m["code"], where, message))
    return sorted(set(found), key=lambda a: (not a.removed, a.where, a.code))


def torchfix(roots: Sequence[str], *, timeout_s: float = TORCHFIX_TIMEOUT_S) -> tuple[list[Advice], str]:
    """TorchFix's findings over the scan's files (its default rules; the files, not the roots, so that it never
    lints a venv under them), and a note when it did not run or failed."""
    if importlib.util.find_spec("torchfix") is None:
        return [], "TorchFix is not installed here (pip install torchfix): its rules were not applied"
    files = [str(p) for p in python_files(roots)]
    try:
        proc = subprocess.run([sys.executable, "-m", "torchfix", "-j", "1", *files], capture_output=True, text=True,
                              timeout=timeout_s, check=False, start_new_session=True)
    except subprocess.TimeoutExpired:
        return [], f"TorchFix did not finish within {timeout_s:g} s: its rules were not applied"
    found = parse_torchfix(proc.stdout)
    if proc.returncode != 0 and not found:
        tail = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
        return [], f"TorchFix failed ({tail[:200]}): its rules were not applied"
    return found, ""


def with_advice(result: CheckResult, advice: Sequence[Advice], note: str) -> CheckResult:
    """The candidate's result with TorchFix's findings: a removed function makes a pass suspicious; the rest is
    listed without changing the outcome."""
    if not advice and not note:
        return result
    removed = [a.line() for a in advice if a.removed]
    rest = [a.line() for a in advice if not a.removed]
    outcome, reason = result.outcome, result.reason
    if removed:
        reason += f"; TorchFix: your code uses functions torch removed: {_shown(removed)}"
        if outcome is Outcome.PASSED:
            outcome = Outcome.SUSPICIOUS
    if rest:
        reason += f"; TorchFix advises: {_shown(rest)}"
    if note:
        reason += f"; {note}"
    metrics = {**result.metrics, "torchfix": [{"code": a.code, "where": a.where, "message": a.message} for a in advice]}
    details = "\n".join(filter(None, [result.details, *(f"TorchFix {line}" for line in [*removed, *rest]), note]))
    return replace(result, outcome=outcome, reason=reason, metrics=metrics, details=details)


def ask(python: str, names: Sequence[str], *, timeout_s: float = TIMEOUT_S) -> dict[str, Any]:
    """worker/apinames.py's answer for `names` in the environment of `python`: {"torch", "names": {name: {...}}}."""
    request = json.dumps({"kind": KIND, "schema_version": SCHEMA_VERSION, "names": list(names)})
    with tempfile.TemporaryDirectory(prefix="tuc-api-") as empty:
        try:
            proc = subprocess.run([python, "-m", "torch_upgrade_check.worker.apinames"], input=request, capture_output=True, text=True,
                                  timeout=timeout_s, cwd=empty, env=worker_env(), check=False, start_new_session=True)
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


def _uses(uses: Uses, name: str) -> str:
    where = uses.get(name, [])
    more = f" and {len(where) - SHOWN_USES} more" if len(where) > SHOWN_USES else ""
    return ", ".join(where[:SHOWN_USES]) + more


def _shown(lines: list[str]) -> str:
    return "; ".join(lines[:LISTED]) + (f"; and {len(lines) - LISTED} more" if len(lines) > LISTED else "")


@dataclass(frozen=True)
class Findings:
    """The candidate's names against the baseline's: what fails, what warns, what neither side has."""

    gone: list[str]
    warned: list[str]
    narrowed: list[str]
    neither: list[str]


def compare_answers(base: Mapping[str, Any], cand: Mapping[str, Any]) -> Findings:
    gone, warned, narrowed, neither = [], [], [], []
    for name, c in sorted(cand.items()):
        b = base.get(name, {})
        if not c.get("exists"):
            (gone if b.get("exists") else neither).append(name)
            continue
        if set(c.get("warns", [])) - set(b.get("warns", [])):
            warned.append(name)
        before, now = b.get("parameters"), c.get("parameters")
        if b.get("exists") and before is not None and now is not None and set(before) - set(now):
            narrowed.append(name)
    return Findings(gone, warned, narrowed, neither)


def judge(uses: Uses, answers: Mapping[str, Mapping[str, Any]], *, device: str, repro: str, seconds: float = 0.0,
          baseline_label: str = "") -> dict[str, CheckResult]:
    """Each side's `stack[-]/api` result; the candidate's against the baseline's answers when there is one."""
    def result(outcome: Outcome, reason: str, metrics: dict[str, Any], details: list[str]) -> CheckResult:
        return CheckResult(WORKLOAD, ASPECT, device, DTYPE, outcome, reason=reason, metrics=metrics,
                           details="\n".join(details), duration_s=round(seconds, 3), repro=repro)

    def missing(name: str, side: Mapping[str, Any]) -> str:
        a = side[name]
        why = a.get("error") or f"{a.get('missing', name)} does not exist"
        return f"{name} at {_uses(uses, name)}: {why}"

    results: dict[str, CheckResult] = {}
    base = answers.get("baseline")
    cand = answers["candidate"]
    if base is not None:
        absent = [n for n, a in base["names"].items() if not a.get("exists")]
        results["baseline"] = result(Outcome.PASSED, f"{len(base['names']) - len(absent)} of {len(base['names'])} torch "
                                     f"names your code uses exist with torch {base.get('torch', '?')}",
                                     {"uses": uses, "names": base["names"]}, [missing(n, base["names"]) for n in absent])
    if base is None:
        absent = [n for n, a in cand["names"].items() if not a.get("exists")]
        lines = [missing(n, cand["names"]) for n in absent]
        reason = (f"{len(absent)} of {len(cand['names'])} torch names your code uses do not exist with torch "
                  f"{cand.get('torch', '?')} (no baseline says whether they did before): {_shown(lines)}" if absent else
                  f"all {len(cand['names'])} torch names your code uses exist")
        results["candidate"] = result(Outcome.SUSPICIOUS if absent else Outcome.PASSED, reason,
                                      {"uses": uses, "names": cand["names"], "missing": absent}, lines)
        return results
    f = compare_answers(base["names"], cand["names"])
    since = f" with baseline {baseline_label}" if baseline_label else " on the baseline"
    gone = [missing(n, cand["names"]) for n in f.gone]
    warned = [f"{n} at {_uses(uses, n)} now warns: "
              + "; ".join(sorted(set(cand["names"][n]["warns"]) - set(base["names"][n].get("warns", []))))
              for n in f.warned]
    narrowed = [f"{n} at {_uses(uses, n)} lost parameters "
                + ", ".join(p for p in base["names"][n]["parameters"] if p not in cand["names"][n]["parameters"])
                for n in f.narrowed]
    neither = [f"{n} at {_uses(uses, n)}" for n in f.neither]
    metrics = {"uses": uses, "names": cand["names"], "gone": f.gone, "warned": f.warned, "narrowed": f.narrowed,
               "missing_on_both": f.neither}
    details = [*gone, *warned, *narrowed, *(f"missing{since} too (your code's own, not judged): {n}" for n in neither)]
    also = (f"; {len(neither)} missing{since} too (your code's own names or typos, not judged): "
            + _shown(neither)) if neither else ""
    if gone:
        verb = "exists" if len(gone) == 1 else "exist"
        reason = f"{plural_of(len(gone), 'torch name')} your code uses {verb}{since} and not here: {_shown(gone)}"
        outcome = Outcome.FAILED
    elif warned or narrowed:
        reason = f"every torch name your code uses{since} exists here; changed: {_shown([*warned, *narrowed])}"
        outcome = Outcome.SUSPICIOUS
    else:
        reason = f"every torch name your code uses{since} exists here ({len(cand['names']) - len(neither)} names)"
        outcome = Outcome.PASSED
    results["candidate"] = result(outcome, reason + also, metrics, details)
    return results


def check(pythons: Mapping[str, str], roots: Sequence[str], *, device: str, repro: str, timeout_s: float = TIMEOUT_S,
          baseline_label: str = "", say: Callable[[str], None] = print) -> dict[str, CheckResult]:
    started = time.monotonic()
    uses = scan(roots)
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
        linted = pool.submit(torchfix, roots)
    advice, note = linted.result()
    for role, future in futures.items():
        try:
            answers[role] = future.result()
        except InfrastructureError as e:  # this check's error, on this side; every other result stands
            errors[role] = CheckResult(WORKLOAD, ASPECT, device, DTYPE, Outcome.ERROR, reason=str(e),
                                       metrics={"uses": uses}, duration_s=round(time.monotonic() - started, 3),
                                       repro=repro)
    if "candidate" not in answers:
        return {**{role: judge(uses, {"candidate": a}, device=device, repro=repro)["candidate"]
                   for role, a in answers.items()}, **errors}
    if "baseline" in errors:
        answers.pop("baseline", None)
    judged = judge(uses, answers, device=device, repro=repro, seconds=time.monotonic() - started,
                   baseline_label=baseline_label)
    judged["candidate"] = with_advice(judged["candidate"], advice, note)
    return {**judged, **errors}
