"""What a stack check's host.py is given (its `on_host(context)`, which commands/stack_checks calls through the check's
row at its stage), and the rules the host checks share for when they run (never imports torch)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from torch_upgrade_check import suite
from torch_upgrade_check.aspects._stack import DTYPE, WORKLOAD
from torch_upgrade_check.model import CheckResult, CheckSpec

T = TypeVar("T")
# commands.settings' RunSettings or CompareSettings: a command's type, which nothing below the commands imports
Settings = Any


def selected(only: Sequence[str], aspect: str) -> bool:
    """Whether --only (none: everything) keeps the stack check of `aspect`."""
    return not only or suite.selected(CheckSpec(workload=WORKLOAD, aspect=aspect, device="", dtype=DTYPE), only)


def wanted(s: Settings, only: Sequence[str], aspect: str) -> bool:
    """imports and abi run with a stack (unless --only leaves them out), or without one when --only asks for them."""
    if not selected(only, aspect):
        return False
    return bool(s.stack) or bool(only)


def own_requirements(s: Settings) -> dict[str, tuple[str, ...]]:
    """Each side's own requirements when the two sides' stacks were read apart (at their refs); {} when they are one,
    so nothing is the pull request's doing."""
    base, cand = s.stacks.get("baseline"), s.stacks.get("candidate")
    if base is None or cand is None or base is cand:
        return {}
    return {"baseline": base.requirements, "candidate": cand.requirements}


def said(results: dict[str, CheckResult], aspect: str, say: Callable[[str], None]) -> dict[str, CheckResult]:
    """`results`, each side's outcome and reason said as it is decided."""
    for role, r in results.items():
        say(f"{role}: {aspect} {r.outcome.value}: {r.reason[:300]}")
    return results


@dataclass(frozen=True)
class HostContext:
    """What a host check's `on_host(context)` is given: the run's settings and --only, the device its results are filed
    under, and its stage's facts (Stage.BEFORE_INSTALL: each side's torch SPEC and prepared interpreter, the tool's
    python, the output folder; Stage.INSTALLED: each side's python and its report's label, the run's timeout)."""

    settings: Settings
    only: Sequence[str]
    device: str
    repro: Callable[[CheckSpec], str]
    say: Callable[[str], None]
    sides: Mapping[str, tuple[Any, str | None]] = field(default_factory=dict)  # role -> (provision.TorchSpec, prepared)
    base_python: str = ""
    out: Path = Path()
    pythons: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float = 0.0
    # what one check of the stage works out for another (imports' listing of each side, which abi reads): once a run
    shared: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def repro_of(self, aspect: str) -> str:
        return self.repro(CheckSpec(WORKLOAD, aspect, self.device, DTYPE))

    def once(self, key: str, make: Callable[[], T]) -> T:
        """`make()`'s value, worked out by the first check of the stage that asks for it."""
        if key not in self.shared:
            self.shared[key] = make()
        return self.shared[key]
