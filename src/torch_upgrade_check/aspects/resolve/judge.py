"""The resolve aspect's typed metrics and rule (pure): what pip's dry runs (host.py) resolved for each side, judged.

A candidate whose stack resolves passes, listing the packages that resolve unlike the baseline's in two parts: those
the team's requirements changed and those the resolver moved unasked. One whose stack does not resolve with its
torch fails, naming each package whose requirement on torch refuses the candidate's (from a resolution that works),
each pin of the stack the candidate torch's own requirements rule out, and the release of each refusing package
that accepts it (host.py asks the index).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from torch_upgrade_check.aspects._metrics import Recorded
from torch_upgrade_check.aspects._stack import listed

ASPECT = "resolve"
LISTED = 12  # changed packages named in the reason; all are in metrics and details


@dataclass(frozen=True)
class Metrics(Recorded):
    """The resolve check's metrics (host.check writes them): the torch and packages a side resolved, what changed
    since the baseline's resolution, what refused the candidate's torch, and what blocks a run (`runner`: pip could
    not reach the index; `torch_absent`: the side's torch is not on its index)."""

    torch: str | None = None
    packages: Mapping[str, str] | None = None
    changed: Sequence[str] | None = None
    pinned: Sequence[str] | None = None  # changed by the team's requirements: 'timm 1.0.31 -> 1.0.32'
    unasked: Sequence[str] | None = None
    conflicts: Sequence[str] | None = None
    fixes: Sequence[str] | None = None
    pip: str | None = None
    log: str | None = None
    runner: bool | None = None
    torch_absent: bool | None = None


class Resolved(Protocol):
    """A dry run's resolution, as the rule reads it (host.Resolution)."""

    versions: Mapping[str, str]
    requires: Mapping[str, Sequence[Requirement]]


def refusals(reference: Resolved, torch_version: str) -> list[tuple[str, str, str]]:
    """(package, its version, its requirement on torch) for each resolved package that refuses `torch_version`."""
    found = []
    for name, reqs in sorted(reference.requires.items()):
        for req in reqs:
            if canonicalize_name(req.name) == "torch" and not _accepts(req, torch_version):
                found.append((name, reference.versions.get(name, "?"), f"torch{req.specifier}"))
    return found


def unmet_by_stack(torch_meta: Resolved, stack: Sequence[str]) -> list[tuple[str, str, str]]:
    """(package, the stack's requirement, torch's requirement) where the stack rules out every version the candidate
    torch accepts: an exact pin outside torch's range, or an upper bound below torch's lower one."""
    torch_reqs = {canonicalize_name(r.name): r for r in torch_meta.requires.get("torch", [])}
    found = []
    for text in stack:
        try:
            mine = Requirement(text)
        except InvalidRequirement:
            continue
        theirs = torch_reqs.get(canonicalize_name(mine.name))
        if theirs is not None and _disjoint(mine.specifier, theirs.specifier):
            found.append((canonicalize_name(mine.name), str(mine), f"{theirs.name}{theirs.specifier}"))
    return found


def _disjoint(mine: Any, theirs: Any) -> bool:
    for m in mine:
        if m.operator in ("==", "===") and "*" not in m.version and not _in(theirs, m.version):
            return True
        if m.operator in ("<", "<="):
            for t in theirs:
                if t.operator in (">=", ">", "==", "~=") and "*" not in t.version:
                    low, high = Version(t.version), Version(m.version)
                    if low > high or (low == high and (m.operator == "<" or t.operator == ">")):
                        return True
    return False


def _in(specifier: Any, version: str) -> bool:
    try:
        return specifier.contains(Version(version), prereleases=True)
    except InvalidVersion:
        return True


def _accepts(req: Requirement, version: str) -> bool:
    # a local label (+cpu) is not part of what a requirement on torch pins
    return _in(req.specifier, version.split("+")[0]) or _in(req.specifier, version)


def changes(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    """'numpy 2.1.3 -> 2.2.0', 'foo (new) 1.0', 'bar 1.0 (gone)' for every package but torch, in name order."""
    lines = []
    for name in sorted(set(before) | set(after)):
        if name == "torch" or before.get(name) == after.get(name):
            continue
        if name not in before:
            lines.append(f"{name} (new) {after[name]}")
        elif name not in after:
            lines.append(f"{name} {before[name]} (gone)")
        else:
            lines.append(f"{name} {before[name]} -> {after[name]}")
    return lines


def pinned_by_team(before: Sequence[str], after: Sequence[str]) -> set[str]:
    """The packages (canonical names) whose requirements differ between two stacks: those the team changed."""
    def by_name(stack: Sequence[str]) -> dict[str, set[str]]:
        named: dict[str, set[str]] = {}
        for text in stack:
            try:
                req = Requirement(text)
            except InvalidRequirement:
                continue
            name = canonicalize_name(req.name)  # `Pillow` and `pillow` are one requirement, as pip reads them
            named.setdefault(name, set()).add(str(req).replace(req.name, name, 1))
        return named

    b, a = by_name(before), by_name(after)
    return {name for name in set(b) | set(a) if b.get(name) != a.get(name)}


def split_changes(before: Mapping[str, str], after: Mapping[str, str], team: set[str]) -> tuple[list[str], list[str]]:
    """changes() parted into what the team's requirements changed and what the resolver changed unasked."""
    pinned, unasked = [], []
    for line in changes(before, after):
        (pinned if canonicalize_name(line.split(" ", 1)[0]) in team else unasked).append(line)
    return pinned, unasked


def resolved(torch: str, versions: Mapping[str, str], reference: Mapping[str, str] | None,
             team: set[str]) -> tuple[str, dict[str, Any], str]:
    """The candidate's stack resolved with its torch: the reason, metrics and details of its pass, with what resolves
    unlike the baseline's resolution (`reference`; None: none to compare with), the team's changes apart."""
    compared = reference is not None
    changed = changes(reference, versions) if reference is not None else []
    pinned, unasked = split_changes(reference, versions, team) if reference is not None else ([], [])
    also = ""
    if pinned:
        also += f"; {len(pinned)} changed by the team's requirements: {listed(pinned, LISTED)}"
    if unasked:
        also += f"; {len(unasked)} changed by the resolver unasked: {listed(unasked, LISTED)}"
    if compared and not changed:
        also = "; every package resolves as with the baseline's torch"
    details = [*(f"{line} (the team's requirements)" for line in pinned),
               *(f"{line} (the resolver, unasked)" for line in unasked)]
    return (f"the stack resolves with torch {torch} ({len(versions)} packages){also}",
            {"torch": torch, "packages": versions, "changed": changed, "pinned": pinned, "unasked": unasked},
            "\n".join(details))


def refused(torch: str, conflicts: Sequence[str], fixes: Sequence[str], pip: str, log: str) -> tuple[str, dict[str, Any], str]:
    """The candidate's stack refused by its torch: the reason, metrics and details of its failure, naming the
    conflicts and their fixes (pip's own reason when none was found)."""
    lines, fixes = list(conflicts), list(fixes)
    culprit = "; ".join([*lines, *fixes]) or f"pip: {pip}"
    return (f"the stack does not resolve with torch {torch}: {culprit}",
            {"torch": torch, "conflicts": lines, "fixes": fixes, "pip": pip, "log": log},
            "\n".join([*lines, *fixes, f"pip: {pip}"]))


def packages_the_team_changed(m: Metrics) -> frozenset[str] | None:
    """The packages (as the summary's comparison spells them) whose requirement the team changed between the sides,
    from the candidate's resolve result; None where it lists none (no resolve of the two stacks)."""
    if not isinstance(m.pinned, list):
        return None
    return frozenset(re.sub(r"[-_.]+", "-", str(line).split(" ", 1)[0]).lower() for line in m.pinned)
