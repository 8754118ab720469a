"""Binary search for the first bad build (pure): which build to try next, and what was found.

Builds are ordered oldest first; the first is known good and the last known bad (the caller confirms
both before searching). A build is judged `good`, `bad`, or `skip` (it could not be installed, or its
measurement could not be settled), as `git bisect skip` does: the search then tries the untested build
nearest the middle. The answer is the last good and the first bad build; skipped builds between them
widen the range and are named.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Found:
    """What the search concluded: indexes into the build list."""

    last_good: int
    first_bad: int
    skipped_between: tuple[int, ...] = ()

    @property
    def exact(self) -> bool:
        """The first bad build is pinned down: nothing untestable lies between it and the last good one."""
        return not self.skipped_between


def next_build(verdicts: dict[int, str], count: int) -> int | None:
    """The build to try next, or None when the range is narrowed down as far as it can be."""
    last_good, first_bad = _bounds(verdicts, count)
    untested = [i for i in range(last_good + 1, first_bad) if i not in verdicts]
    if not untested:
        return None
    middle = (last_good + first_bad) / 2
    return min(untested, key=lambda i: (abs(i - middle), i))


def found(verdicts: dict[int, str], count: int) -> Found:
    last_good, first_bad = _bounds(verdicts, count)
    return Found(last_good, first_bad, tuple(i for i in range(last_good + 1, first_bad) if verdicts.get(i) == "skip"))


def _bounds(verdicts: dict[int, str], count: int) -> tuple[int, int]:
    """The newest good build before the oldest bad one."""
    bad = [i for i, v in verdicts.items() if v == "bad"]
    first_bad = min(bad) if bad else count - 1
    good = [i for i, v in verdicts.items() if v == "good" and i < first_bad]
    return (max(good) if good else 0), first_bad


def max_steps(count: int) -> int:
    """Builds judged by a search without skips: the two ends, then ceil(log2(count - 1))."""
    steps, span = 0, count - 1
    while span > 1:
        span = (span + 1) // 2
        steps += 1
    return steps + 2

