"""TorchFix over the team's files for the api check: only the files one of its rules could match, in parallel.

TorchFix (PyTorch's linter of deprecated and removed APIs) parses every file with libcst and resolves qualified
names, about 40 ms a file: on transformers + timm (3,164 files) its single process took longer than the check allows.
Each of its default rules matches a qualified name (or, for TOR002 and TOR203, a spelling), so a file that never
spells that name's last part as a word cannot be reported by it; `worth_linting` keeps the rest, read cheaply as
text. TRIGGERS holds those words per rule as read from TorchFix RULES_READ_FROM's visitors (the removed and
deprecated functions come from its own deprecated_symbols.yaml); another TorchFix version lints every file.
tests/test_apiscan.py checks that TRIGGERS names every default rule of the installed TorchFix.
"""

from __future__ import annotations

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
# The words each default rule (all but TOR3xx, TOR4xx, TOR9xx) of TorchFix 0.7.0 needs in a file: the last part of
# the qualified name its visitor matches. The deprecated-symbols rules add every name of deprecated_symbols.yaml.
TRIGGERS: dict[str, tuple[str, ...]] = {
    "TOR001": (), "TOR004": (), "TOR101": (), "TOR103": (),  # deprecated_symbols.yaml's names (rule_names)
    "TOR002": ("require_grad",),  # `x.require_grad = ...`, the typo
    "TOR003": ("checkpoint",),  # torch.utils.checkpoint.checkpoint without use_reentrant
    "TOR102": ("load",),  # torch.load without weights_only
    "TOR104": ("default_collate", "default_convert"), "TOR105": ("default_collate", "default_convert"),
    "TOR106": ("log",),  # torch.log(1 + x)
    "TOR107": ("exp",),  # torch.exp(x) - 1
    "TOR201": ("pretrained", "pretrained_backbone"),  # torchvision models' pretrained= keyword
    "TOR202": ("ToTensor",),  # torchvision.transforms.v2.ToTensor
    "TOR203": ("torchvision",),  # import torchvision.models as models
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
    """The identifiers one of TorchFix's default rules needs in a file before it can report there, or None where the
    installed TorchFix is not the one TRIGGERS was read from (then every file is linted)."""
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
    names = {str(s["name"]).rsplit(".", 1)[-1] for s in symbols if isinstance(s, dict) and s.get("name")}
    return frozenset(names.union(*TRIGGERS.values()))


def worth_linting(files: Sequence[Path], names: frozenset[str] | None) -> list[Path]:
    """The files whose text holds one of `names` as a word (a cheap superset of what TorchFix's rules can match:
    a rule matches a qualified name, whose last part the file spells somewhere, in the import if not the call)."""
    if names is None:
        return list(files)
    word = re.compile(r"\b(?:" + "|".join(sorted(map(re.escape, names))) + r")\b")
    kept = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if "torch" in text and word.search(text):  # TorchFix itself skips a file without "torch"
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
    jobs = str(max(1, min(len(kept) // 50 + 1, os.cpu_count() or 1, MAX_JOBS)))  # a process costs ~0.5 s to start
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
