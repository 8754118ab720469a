"""What a check of each aspect costs, as measured on the development machine: `--list` prints it beside every check,
and docs/benchmarks.md's table is the same figures (a test keeps them equal; no torch; pure)."""

from __future__ import annotations

from collections.abc import Iterable

from torch_upgrade_check.aspects import TABLE, Cost

MEASURED_ON = ("measured on a shared 2-core x86_64 CPU with torch 2.13.0+cpu (2026-12-01), while other jobs ran: "
               "a guide, not a promise")
# aspect -> (median seconds a check, the most a check took, a note), from aspects.TABLE: benchmarks/check_costs.py
# (`run` of the built-in suite, and of a small MLP with the opt-in aspects and two shipped files); cross-version from a
# compare of the built-ins (the candidate's side) (None: not measured here, and the note says why). Measured while
# three other jobs shared the 2 cores: the built-in suite took 293 s then, 82 s on the quiet machine, so these run high.
ASPECT_COST_S: dict[str, Cost] = {a.name: a.cost for a in TABLE if a.cost is not None}
COMPARE_NOTE = ("in compare each check runs on both sides, and latency, compiled-latency, memory and compile-time are "
                "measured A/B within --ab-budget a check")


def estimate(aspect: str) -> str:
    """`~0.1 s`, `~0.2 s (up to 9 s)`, with what it covers; `?` for an aspect never measured."""
    if aspect not in ASPECT_COST_S:
        return "?"
    median, most, note = ASPECT_COST_S[aspect]
    if median is None or most is None:
        return note
    text = f"~{_seconds(median)}" + (f" (up to {_seconds(most)})" if most >= 2 * median and most - median >= 0.5 else "")
    return f"{text}; {note}" if note else text


def listing(checks: Iterable[tuple[str, str]], *, compare: bool = False) -> list[str]:
    """The `--list` lines: each check id with its aspect's estimate, then where the figures come from."""
    rows = list(checks)
    width = max((len(check) for check, _ in rows), default=0)
    lines = [f"{check:<{width}}  {estimate(aspect)}" for check, aspect in rows]
    return [*lines, f"# seconds a check, by aspect, {MEASURED_ON}" + (f"; {COMPARE_NOTE}" if compare else "")]


def _seconds(s: float) -> str:
    return f"{s:.1f} s" if s < 10 else f"{s:.0f} s"
