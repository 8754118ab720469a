"""Each side's stack for compare, read at its own git ref (--base-ref, --head-ref), and `--baseline/--candidate auto`
read from it: planned while the settings are built, before anything runs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from torch_upgrade_check import stack
from torch_upgrade_check.config import Config
from torch_upgrade_check.errors import UsageError

ROLES = ("baseline", "candidate")
REF_FLAG = {"baseline": "--base-ref", "candidate": "--head-ref"}


@dataclass(frozen=True)
class Asked:
    """The stack compare's flags and config ask for: the config's `requirements:` and `extras:`, --requirements and
    --extras, and each side's git ref to read them at (role -> --base-ref / --head-ref; None: the working tree)."""

    cfg: Config | None
    requirements: tuple[str, ...]
    extras: tuple[str, ...]
    refs: Mapping[str, str | None]

    def load(self, read: stack.Reader | None = None, *, absent_ok: bool = False) -> stack.Stack:
        return stack.requested(self.cfg, self.requirements, self.extras, read=read, absent_ok=absent_ok)


def where(refs: Mapping[str, str | None], role: str) -> str:
    """Where a side's stack files are read: `at --base-ref main`, or `in the working tree`."""
    ref = refs.get(role)
    return f"at {REF_FLAG[role]} {ref}" if ref else "in the working tree"


def side_stacks(asked: Asked) -> dict[str, stack.Stack]:
    """Each side's stack from its own ref: the baseline's files as --base-ref has them, the candidate's as --head-ref
    has them (the working tree without one), `-r` includes too. A file one side lacks is the other side's alone
    (Stack.absent says so); a file neither side has is a UsageError naming both places."""
    refs = asked.refs
    if not any(refs.get(role) for role in ROLES):
        one = asked.load()
        return {role: one for role in ROLES}
    problems: list[str] = []
    found: dict[str, stack.Stack] = {}
    for role in ROLES:
        ref = refs.get(role)
        try:
            found[role] = asked.load(stack.at_ref(ref, REF_FLAG[role]) if ref else None, absent_ok=True)
        except UsageError as e:
            problems += e.problems
    if problems:
        raise UsageError(*problems)
    for path in found["baseline"].absent:
        if path in found["candidate"].absent:
            problems.append(f"requirements file {path} does not exist {where(refs, 'baseline')}, nor "
                            f"{where(refs, 'candidate')}; pass the path of a file one side has (relative to the current "
                            "folder), or a VERSION instead of auto")
    if problems:
        raise UsageError(*problems)
    return found


def stack_notes(refs: Mapping[str, str | None], stacks: Mapping[str, stack.Stack]) -> list[str]:
    """One line a side saying where its stack was read, and each file that side lacks (the other side's alone)."""
    if stacks.get("baseline") is stacks.get("candidate"):
        return []
    notes = []
    for role in ROLES:
        s = stacks.get(role)
        if s is None or not s:
            continue
        read = f"{', '.join(s.sources)} {where(refs, role)}" if s.sources else f"no file {where(refs, role)}"
        notes.append(f"{role}: the stack is {read} ({len(s.requirements)} requirements beside torch)")
        other = "candidate" if role == "baseline" else "baseline"
        notes += [f"{role}: {path} does not exist {where(refs, role)}: it is the {other}'s alone" for path in s.absent]
    return notes


def plan_stacks(asked: Asked, given: Mapping[str, str | None]) -> tuple[dict[str, stack.Stack], dict[str, str | None]]:
    """Each side's stack (role -> Stack, read at its side's ref) and each side's SPEC as `given`, `auto` replaced by
    the torch that side's stack pins."""
    stacks = side_stacks(asked)
    return stacks, auto_pins(asked, given, stacks)


def auto_pins(asked: Asked, given: Mapping[str, str | None],
              stacks: Mapping[str, stack.Stack] | None = None) -> dict[str, str | None]:
    """`--baseline auto` / `--candidate auto`: the torch the stack's files pin at --base-ref / --head-ref (the working
    tree without --head-ref), read with the stack's own parsers; each side's SPEC, that one for `auto`."""
    problems: list[str] = []
    pinned = dict(given)
    for role in ROLES:
        if given.get(role) != "auto":
            continue
        if role == "baseline" and not asked.refs.get("baseline"):
            problems.append("--baseline auto reads the torch pin at --base-ref REF; pass one (a pull request's base "
                            "branch, like origin/main, or HEAD^1 on its merge commit)")
            continue
        try:
            found = stacks[role] if stacks else side_stacks(asked)[role]
            if not found:
                raise UsageError(f"--{role} auto reads the torch pin from the stack's files; pass --requirements FILE "
                                 "(or the config's requirements:)")
            pinned[role] = stack.torch_spec(found, where(asked.refs, role))
        except UsageError as e:
            problems += e.problems
    if problems:
        raise UsageError(*problems)
    return pinned
