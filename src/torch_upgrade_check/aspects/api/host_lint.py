"""TorchFix over the team's files for the api check: only the files one of its rules could match, in parallel.

TorchFix (PyTorch's linter of deprecated and removed APIs) parses every file with libcst and resolves qualified
names: on transformers + timm (3,164 files) its single process took longer than the check allows. Each of its default
rules matches a qualified name (`torch.load`, `torch.utils.checkpoint.checkpoint`, a name of its
deprecated_symbols.yaml, a `torchvision` model), TOR106/TOR107's only beside an expression of the shape they look
for, or, for TOR002, an attribute spelled `require_grad`; a file that resolves none of those can give it nothing to
report. `worth_linting` reads each file with `ast` (a tenth of
libcst's cost) for the dotted names its imports make reachable, as TorchFix resolves them, and keeps the rest.
TRIGGERS holds each default rule's names as read from TorchFix RULES_READ_FROM's visitors; another TorchFix version
lints every file. tests/test_apiscan.py checks that TRIGGERS names every default rule of the installed TorchFix and
that the kept files give the findings TorchFix gives over every file.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import yaml

from torch_upgrade_check.model import CheckResult, Outcome

TORCHFIX_TIMEOUT_S = 120.0
TORCHFIX_REMOVED = ("TOR001", "TOR004")  # "Use of removed function", "Import of removed function"
TORCHFIX_LINE = re.compile(r"^(?P<file>.+?):(?P<line>\d+):\d+: (?P<code>TOR\d{3}) (?P<message>.*)$")
LISTED = 5
MAX_JOBS = 8
RULES_READ_FROM = "0.7.0"
# What each default rule (all but TOR3xx, TOR4xx, TOR9xx) of TorchFix 0.7.0 matches: qualified names, or prefixes
# ending in "." (any name under them), or "attr:NAME" (an attribute spelled NAME on anything), or "NAME+SHAPE" (the
# name, and somewhere in the file the expression shape the rule looks for: SHAPES). The deprecated-symbols rules
# match every name of deprecated_symbols.yaml, added by rule_names.
TRIGGERS: dict[str, tuple[str, ...]] = {
    "TOR001": (), "TOR004": (), "TOR101": (), "TOR103": (),  # deprecated_symbols.yaml's names (rule_names)
    "TOR002": ("attr:require_grad",),  # `x.require_grad = ...`, the typo
    "TOR003": ("torch.utils.checkpoint.checkpoint",),  # without use_reentrant
    "TOR102": ("torch.load",),  # without weights_only
    "TOR104": ("torch.utils.data._utils.collate.default_collate", "torch.utils.data._utils.collate.default_convert"),
    "TOR105": ("torch.utils.data._utils.collate.default_collate", "torch.utils.data._utils.collate.default_convert"),
    "TOR106": ("torch.log+call(1 + x)",),  # torch.log(1 + x)
    "TOR107": ("torch.exp+call() - 1",),  # torch.exp(x) - 1
    "TOR201": ("torchvision.models.",),  # a model's pretrained= keyword
    "TOR202": ("torchvision.transforms.v2.ToTensor",),
    "TOR203": ("torchvision.datasets", "torchvision.models", "torchvision.transforms"),  # import ... as models
}


def shown_path(path: Path, base: Path) -> str:
    resolved = path.resolve()
    return str(resolved.relative_to(base)) if resolved.is_relative_to(base) else str(path)


def shown(lines: list[str]) -> str:
    return "; ".join(lines[:LISTED]) + (f"; and {len(lines) - LISTED} more" if len(lines) > LISTED else "")


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
            where = f"{shown_path(Path(m['file']), base)}:{m['line']}"
            message = m["message"].strip().removeprefix("[*] ")  # TorchFix's mark of what its --fix rewrites
            found.append(Advice(m["code"], where, message))
    return sorted(set(found), key=lambda a: (not a.removed, a.where, a.code))


def rule_names(installed: Path | None = None) -> frozenset[str] | None:
    """What one of TorchFix's default rules matches (TRIGGERS' forms), or None where the installed TorchFix is not
    the one TRIGGERS was read from (then every file is linted)."""
    spec = importlib.util.find_spec("torchfix")
    if spec is None or not spec.submodule_search_locations:
        return None
    try:
        if importlib.metadata.version("torchfix") != RULES_READ_FROM:
            return None
        folder = installed or Path(next(iter(spec.submodule_search_locations)))
        symbols = yaml.safe_load((folder / "deprecated_symbols.yaml").read_text(encoding="utf-8")) or []
    except (OSError, yaml.YAMLError, importlib.metadata.PackageNotFoundError):
        return None
    names = {str(s["name"]) for s in symbols if isinstance(s, dict) and s.get("name")}
    return frozenset(names.union(*TRIGGERS.values()))


def _is_one(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) in (int, float) and node.value == 1


def shapes(tree: ast.AST) -> set[str]:
    """The expression shapes TOR106 and TOR107 look for, wherever the file has them: a call of one argument
    `1 + x` or `x + 1`, and `call(...) - 1` (1 or 1.0)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords:
            arg = node.args[0]
            if isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Add) and (_is_one(arg.left) or _is_one(arg.right)):
                found.add("call(1 + x)")
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub) and isinstance(node.left, ast.Call) \
                and _is_one(node.right):
            found.add("call() - 1")
    return found


def reachable(tree: ast.AST) -> tuple[set[str], set[str]]:
    """The dotted names the file's imports make reachable (`import a.b as c; c.d` gives a.b.d; `from a import b`
    gives a.b, and what follows b), as TorchFix's qualified names resolve them, and every attribute it spells."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    found = set(aliases.values())
    found |= {n.name for node in ast.walk(tree) if isinstance(node, ast.Import) for n in node.names}
    attrs: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            attrs.add(node.attr)
            parts: list[str] = []
            inner: ast.AST = node
            while isinstance(inner, ast.Attribute):
                parts.append(inner.attr)
                inner = inner.value
            if isinstance(inner, ast.Name) and inner.id in aliases:
                found.add(".".join([aliases[inner.id], *reversed(parts)]))
    return found, attrs


def _matches(names: set[str], attrs: set[str], tree: ast.AST, rules: frozenset[str]) -> bool:
    if any(r.startswith("attr:") and r[5:] in attrs for r in rules):
        return True
    shaped = [r.split("+", 1) for r in rules if "+" in r]
    if any(name in names for name, _ in shaped) and any(
            name in names and shape in shapes(tree) for name, shape in shaped):
        return True
    rules = frozenset(r for r in rules if "+" not in r)
    prefixes = tuple(r for r in rules if r.endswith("."))
    return bool(names & rules) or any(n.startswith(prefixes) for n in names)


def worth_linting(files: Sequence[Path], rules: frozenset[str] | None) -> list[Path]:
    """The files one of `rules` could match (a superset of what TorchFix reports on); a file `ast` cannot read is
    kept, for TorchFix to judge."""
    if rules is None:
        return list(files)
    kept = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if "torch" not in text:  # TorchFix itself skips a file without "torch"
            continue
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            kept.append(path)
            continue
        names, attrs = reachable(tree)
        if _matches(names, attrs, tree, rules):
            kept.append(path)
    return kept


def torchfix(files: Sequence[Path], *, timeout_s: float = TORCHFIX_TIMEOUT_S) -> tuple[list[Advice], str]:
    """TorchFix's findings over the files one of its rules could match (its default rules, in parallel
    processes), and a note when it did not run or failed."""
    if importlib.util.find_spec("torchfix") is None:
        return [], "TorchFix is not installed here (pip install torchfix): its rules were not applied"
    kept = [str(p) for p in worth_linting(files, rule_names())]
    if not kept:
        return [], ""
    jobs = str(max(1, min(len(kept) // 10 + 1, os.cpu_count() or 1, MAX_JOBS)))  # a process costs ~0.5 s to start
    try:
        proc = subprocess.run([sys.executable, "-m", "torchfix", "-j", jobs, *kept], capture_output=True, text=True,
                              timeout=timeout_s, check=False, start_new_session=True)
    except subprocess.TimeoutExpired:
        return [], (f"TorchFix did not finish within {timeout_s:g} s on {len(kept)} files: its rules were not "
                    "applied")
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
        reason += f"; TorchFix: your code uses functions torch removed: {shown(removed)}"
        if outcome is Outcome.PASSED:
            outcome = Outcome.SUSPICIOUS
    if rest:
        reason += f"; TorchFix advises: {shown(rest)}"
    if note:
        reason += f"; {note}"
    metrics = {**result.metrics, "torchfix": [{"code": a.code, "where": a.where, "message": a.message} for a in advice]}
    details = "\n".join(filter(None, [result.details, *(f"TorchFix {line}" for line in [*removed, *rest]), note]))
    return replace(result, outcome=outcome, reason=reason, metrics=metrics, details=details)
