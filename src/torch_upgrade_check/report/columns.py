"""A measured column of an aspect's summary table, and the correctness columns most aspects show (pure).

An aspect's render.py lists its columns with these; report.checks lays the tables out.
"""

from __future__ import annotations

from typing import NamedTuple


class Column(NamedTuple):
    """A measured column: `kind` is "" (a plain number), a unit kind ("ms", "s", "bytes": chosen once per table),
    or "count" (a list's length), "tensors", "worst", "share" (cells of their own)."""

    header: str
    key: str
    kind: str = ""
    attention_only: bool = False  # shown only in the tables of checks that need attention


# Correctness: how many tensors were compared, which one is furthest off, by how much, and on how many elements.
# The relative error stays out of the tables of passing checks: against a golden near zero it explodes (a
# passing check once showed a max rel err of 15,166,603,265) and says nothing; report.json keeps it, and a
# failing check shows it, where it can tell an rtol failure from an atol one.
CORRECTNESS = (Column("tensors", "tensors", "tensors"), Column("worst tensor", "per_tensor", "worst"),
               Column("max abs err", "max_abs_err"), Column("max rel err", "max_rel_err", attention_only=True),
               Column("mismatched", "mismatched_share", "share"))
# the value a table sorts by (largest first, after the outcome) and a matrix cell shows, unless an aspect says
DEFAULT_PRIMARY = Column("max abs err", "max_abs_err")
