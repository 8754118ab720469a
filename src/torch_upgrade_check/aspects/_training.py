"""What the training family's rules share (checkpoint, training-curve): the seeded random stream's change, said
first (stdlib only)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def random_stream_line(changed: Mapping[str, Any] | None) -> str:
    """Where the candidate's seeded random ops draw other numbers than the baseline's (the worker's
    `random_stream_changed`): said first, since the difference that follows is the random stream's, not the
    numerics'."""
    if not isinstance(changed, Mapping):
        return ""
    return (f"the random stream changed, not the numerics: {changed.get('how')} (draw {changed.get('call')} of "
            f"{changed.get('of')}); so ")
