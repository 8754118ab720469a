"""The rules of every kind of value a user gives (stdlib only): parsing, limits and the one-line message.

The CLI (`--rtol`), the action (`input 'rtol'`) and the config file (`thresholds.rtol`) all call these,
so the three front ends accept and refuse exactly the same values. Each parser takes the value as given
(text, or a number from YAML) and `key`, the name the user knows it by, which starts the message; it
returns the parsed value or raises UsageError with one line: the key, the rule, an example, and what it
got. `got` replaces the shown value where the caller knows better (the config shows "a list" for a list).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar

from torch_upgrade_check.errors import UsageError

T = TypeVar("T")


def _number(value: object) -> float:
    """The value as a float, or NaN for what is not a number (NaN fails every rule below).

    Text is read as a number because YAML 1.1 reads `1e-4` as text, and CLI flags and action inputs
    are text. A bool is not a number here, though Python's float(True) is 1.0.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return math.nan
    try:
        return float(value)
    except ValueError:
        return math.nan


def _shown(value: object, got: str | None) -> str:
    return repr(value) if got is None else got


def tolerance(value: object, key: str, *, got: str | None = None) -> float:
    """rtol or atol: a finite number ≥ 0.

    0 turns that term of `atol + rtol·|expected|` off; both 0 asks for bitwise equality, as in
    torch.testing.assert_close.
    """
    number = _number(value)
    if not (number >= 0 and math.isfinite(number)):
        raise UsageError(f"{key} must be a number ≥ 0 like 1e-4 (0 turns that part of the tolerance off), "
                         f"got {_shown(value, got)}")
    return number + 0.0  # -0.0 -> 0.0: the report shows "0", not "-0"


def percent(value: object, key: str, *, got: str | None = None) -> float:
    """A share as a ratio: '10%' -> 0.10, '12.5 %' -> 0.125, a ratio 0.10 (number or text) -> 0.10.

    A bare number above 1 is refused rather than guessed: `10` could mean 10% or 1000%.
    """
    problem = f"{key} must be a percentage like 10% or a ratio like 0.10, got {_shown(value, got)}"
    raw = value.strip() if isinstance(value, str) else value
    is_percent = isinstance(raw, str) and raw.endswith("%")
    number = _number(raw[:-1] if is_percent else raw)  # type: ignore[index]
    if not (number >= 0 and math.isfinite(number)):
        raise UsageError(problem)
    if is_percent:
        return number / 100.0
    if number > 1:
        raise UsageError(f"{problem} (a ratio above 1 is ambiguous: write {number:g}% for {number:g} percent)")
    return number


def _positive(value: object, must: str, got: str | None) -> float:
    """A finite number > 0, else the one-line problem: `must` (`<key> must be ...`) and what was given."""
    number = _number(value)
    if not (number > 0 and math.isfinite(number)):
        raise UsageError(f"{must}, got {_shown(value, got)}")
    return number


def timeout(value: object, key: str, *, got: str | None = None) -> float:
    """Seconds one check may take: a finite number > 0 (0 would stop every check before it starts)."""
    return _positive(value, f"{key} must be a positive number like 600 (seconds per check)", got)


def milliseconds(value: object, key: str, *, got: str | None = None) -> float:
    """A latency limit in milliseconds: a finite number > 0 (no forward pass takes 0 ms)."""
    return _positive(value, f"{key} must be a positive number like 25", got)


def gigabytes(value: object, key: str, *, got: str | None = None) -> float:
    """A disk size in GB (2**30 bytes): a finite number > 0."""
    return _positive(value, f"{key} must be a positive number of GB like 20", got)


def latency_limit(item: str, key: str) -> tuple[str, float]:
    """`NAME=MS` -> (NAME, MS): NAME a workload or a glob of check ids, MS as `milliseconds` allows."""
    name, sep, ms = item.partition("=")
    number = _number(ms)
    if not sep or not name.strip() or not (number > 0 and math.isfinite(number)):
        raise UsageError(f"{key} must be NAME=MS with MS a positive number of milliseconds, like mlp=25, got {item!r}")
    return name.strip(), number


def steps(value: object, key: str, *, got: str | None = None) -> int:
    """Training steps: a whole number from 2 to 10000."""
    number = _number(value) if not isinstance(value, bool) else math.nan
    if not (2 <= number <= 10000 and number.is_integer()):
        raise UsageError(f"{key} must be a whole number of steps from 2 to 10000, like 50, got {_shown(value, got)}")
    return int(number)


def flag(value: object, key: str, *, got: str | None = None) -> bool:
    if isinstance(value, bool):
        return value
    raise UsageError(f"{key} must be true or false, got {_shown(value, got)}")


def threads(value: object, key: str, *, got: str | None = None) -> int:
    """torch CPU threads: a whole number, 1 or more."""
    number = _number(value)
    if not (number >= 1 and number.is_integer()):  # NaN and inf fail both tests
        raise UsageError(f"{key} must be 1 or more (a whole number like 4), got {_shown(value, got)}")
    return int(number)


def undecided(value: object, key: str, *, got: str | None = None) -> str:
    """What an undecided A/B check beyond its threshold does: 'fail' or 'pass'."""
    text = value.strip().lower() if isinstance(value, str) else value
    if text not in ("fail", "pass"):
        raise UsageError(f"{key} must be fail or pass, got {_shown(value, got)}")
    return str(text)


def collect(problems: list[str], parse: Callable[..., T], *args: Any, **kwargs: Any) -> T | None:
    """parse(*args, **kwargs), or None with its problems added to `problems`: front ends report every problem together."""
    try:
        return parse(*args, **kwargs)
    except UsageError as e:
        problems.extend(e.problems)
        return None
