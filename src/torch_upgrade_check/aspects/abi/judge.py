"""The abi aspect's typed metrics and rule (pure): each side's shared objects, read by host.py (ELF, Mach-O), judged:
an extension of torch that needs a torch symbol its side's torch does not export fails, named; a side that could read
too little, or found nothing linking torch, is skipped saying which (never a pass on nothing compared)."""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from torch_upgrade_check.aspects._metrics import Recorded
from torch_upgrade_check.aspects._stack import DTYPE, WORKLOAD
from torch_upgrade_check.model import CheckResult, Outcome

ASPECT = "abi"
LISTED = 5


@dataclass(frozen=True)
class Metrics(Recorded):
    """The abi check's metrics (judge_sides writes them): the extensions of torch counted, the files that could not be
    read, and each extension's missing symbols."""

    extensions: int | None = None
    unreadable: Sequence[str] | None = None
    # file -> distribution, version, symbols (demangled), mangled, stack ("new in the candidate's stack", ...)
    missing: Mapping[str, Mapping[str, Any]] | None = None


@dataclass(frozen=True)
class Missing:
    distribution: str
    version: str
    file: str
    symbols: tuple[str, ...]  # mangled
    demangled: tuple[str, ...]  # the same, as C++ names (host.demangle)

    def says(self, note: str = "") -> str:
        shown = ", ".join(self.demangled[:3])
        more = f" and {len(self.symbols) - 3} more" if len(self.symbols) > 3 else ""
        return f"{posixpath.basename(self.file)} ({self.distribution} {self.version}{note}) needs {shown}{more}"


@dataclass(frozen=True)
class Scan:
    """One side's shared objects, read: `count` extensions of torch among `total` files, the `missing` ones, the
    `unreadable` files, and why torch's own libraries could not be read ("" when they could, or were not needed)."""

    count: int
    missing: list[Missing]
    unreadable: list[str]
    total: int
    torch_unread: str = ""

    def unread(self, label: str) -> str:
        """Why the side is skipped, having read too little to judge: none of its files, or none of torch's own
        libraries while extensions link them; "" when it can be judged."""
        if self.unreadable and len(self.unreadable) == self.total:
            return (f"none of the {self.total} shared objects here could be read, so none is checked against torch "
                    f"{label}'s exports: {'; '.join(self.unreadable[:2])}")
        if self.torch_unread:
            return (f"torch {label}'s own libraries could not be read ({self.torch_unread}), so the {self.count} shared "
                    f"objects linking torch are not checked against its exports")
        return ""


def judge_sides(scans: Mapping[str, Scan], notes: Mapping[str, Mapping[str, str]], *, device: str, repro: str,
                labels: Mapping[str, str], seconds: Mapping[str, float]) -> dict[str, CheckResult]:
    """Each side's `stack[-]/abi` result from its read shared objects: a torch symbol an extension needs and the side's
    torch does not export fails, named as new in the candidate's stack when the baseline does not have its
    distribution, and as removed by the team's pull request on the baseline's side (`notes`: {side: {distribution:
    note}}); a side that read too little, or found nothing linking torch, is skipped saying so."""
    results = {}
    for role, found in scans.items():
        note = notes.get(role, {})
        count, missing, unreadable = found.count, found.missing, found.unreadable
        label = labels.get(role, "")
        metrics: dict[str, Any] = {"extensions": count, "unreadable": unreadable,
                                   "missing": {m.file: {"distribution": m.distribution, "version": m.version,
                                                        "symbols": list(m.demangled),
                                                        "mangled": list(m.symbols),
                                                        "stack": note.get(m.distribution, "").lstrip(", ")}
                                           for m in missing}}
        details = "\n".join([*(f"{m.file} ({m.distribution} {m.version}{note.get(m.distribution, '')}): "
                                + "; ".join(m.demangled) for m in missing),
                             *(f"unreadable: {u}" for u in unreadable)])
        reason, outcome = _decided(found, label, note)
        results[role] = CheckResult(WORKLOAD, ASPECT, device, DTYPE, outcome, reason=reason, metrics=metrics,
                                    details=details, duration_s=round(seconds.get(role, 0.0), 3), repro=repro)
    return results


def _decided(found: Scan, label: str, note: Mapping[str, str]) -> tuple[str, Outcome]:
    """One side's reason and outcome."""
    count, missing, unreadable = found.count, found.missing, found.unreadable
    unread = found.unread(label)
    if unread:
        return unread, Outcome.SKIPPED
    if not count:  # nothing to check against torch's exports: never a pass on nothing compared
        read = found.total - len(unreadable)
        reason = (f"no shared object here links torch's libraries ({read} read, none needs libtorch or libc10), "
                  f"so none was checked against torch {label}'s exports")
        reason += f"; {len(unreadable)} could not be read ({unreadable[0]})" if unreadable else ""
        return reason, Outcome.SKIPPED
    if missing:
        shown = "; ".join(m.says(note.get(m.distribution, "")) for m in missing[:LISTED])
        return (f"{len(missing)} of {count} shared objects linking torch need symbols torch {label} does not "
                f"export: {shown}"), Outcome.FAILED
    reason = f"every torch symbol the {count} shared objects linking torch need is exported by torch {label}"
    reason += f"; {len(unreadable)} could not be read ({unreadable[0]})" if unreadable else ""
    return reason, Outcome.PASSED
