"""What the stack checks share (resolve, imports, abi, api; commands/stack_checks runs them through their rows): the
workload and dtype in every stack check's id, `stack[-]/<aspect>`, the per-side result builder their judges share, and
how a reason names the first few of a list (stdlib only: hostchecks/context.py holds what their host.py is given)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

WORKLOAD = "stack"
DTYPE = "-"
T = TypeVar("T")
R = TypeVar("R")  # the result a judge makes: model.CheckResult (this module imports only the stdlib)


def listed(lines: Sequence[str], most: int) -> str:
    """The first `most` of `lines`, `; `-joined, and how many more there are (a reason stays one readable line)."""
    return "; ".join(lines[:most]) + (f"; and {len(lines) - most} more" if len(lines) > most else "")


@dataclass(frozen=True)
class Built(Generic[R]):
    """A stack check's result maker: what each side's result shares (its id, repro and duration), made by `make`
    (model.CheckResult) with the outcome, reason, metrics and details lines a side's rule decided."""

    make: Callable[..., R]
    aspect: str
    device: str
    repro: str
    seconds: float = 0.0

    def __call__(self, outcome: Any, reason: str, metrics: dict[str, Any], details: str | Sequence[str]) -> R:
        text = details if isinstance(details, str) else "\n".join(details)
        return self.make(WORKLOAD, self.aspect, self.device, DTYPE, outcome, reason=reason, metrics=metrics,
                         details=text, duration_s=round(self.seconds, 3), repro=self.repro)


def by_side(sides: Mapping[str, T], *, baseline: Callable[[T], R], alone: Callable[[T], R],
            against: Callable[[T, T], R]) -> dict[str, R]:
    """Each side's result: the baseline's by itself, the candidate's against the baseline's (or `alone` without one)."""
    results: dict[str, R] = {}
    base = sides.get("baseline")
    if base is not None:
        results["baseline"] = baseline(base)
    cand = sides["candidate"]
    results["candidate"] = alone(cand) if base is None else against(base, cand)
    return results
