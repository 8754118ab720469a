"""What the stack checks share (resolve, imports, abi, api; commands/stack_checks runs them): the workload and dtype
in every stack check's id, `stack[-]/<aspect>`, and how a reason names the first few of a list (stdlib only)."""

from __future__ import annotations

from collections.abc import Sequence

WORKLOAD = "stack"
DTYPE = "-"


def listed(lines: Sequence[str], most: int) -> str:
    """The first `most` of `lines`, `; `-joined, and how many more there are (a reason stays one readable line)."""
    return "; ".join(lines[:most]) + (f"; and {len(lines) - most} more" if len(lines) > most else "")
