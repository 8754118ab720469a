"""Exceptions that carry their own message and map to one exit code each (stdlib only)."""

from __future__ import annotations

EXIT_PASSED = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INFRA = 3


class UsageError(Exception):
    """Bad flags, inputs, config or device: exit 2 with the message (one line per problem)."""

    def __init__(self, *problems: str) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems
