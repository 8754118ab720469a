"""Typed metrics: the base of every aspect's `Metrics`, read from a worker's JSON dict and written back unchanged.

A judge and a renderer read an aspect's numbers by attribute; report.json keeps the dict the worker wrote, so a
record remembers the keys it was read from, in their order, and the ones its type does not name (stdlib only).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, NamedTuple, TypeVar

R = TypeVar("R", bound="Recorded")
_OWN = ("keys_", "rest_")


@dataclass(frozen=True)
class Recorded:
    """A worker's JSON object, typed: a field for each key the aspect reads (None where the worker wrote none), the
    other keys kept as they came. `to_dict` gives back the object it was read from, key for key and in order."""

    keys_: tuple[str, ...] = field(default=(), repr=False)
    rest_: Mapping[str, Any] = field(default_factory=dict, repr=False)
    # a field holding a list of JSON objects: the record type each of them is read as
    NESTED: ClassVar[Mapping[str, type[Recorded]]] = {}

    @classmethod
    def named(cls) -> frozenset[str]:
        """The keys this type gives a field."""
        return frozenset(f.name for f in fields(cls) if f.name not in _OWN)

    @classmethod
    def from_dict(cls: type[R], d: Mapping[str, Any]) -> R:  # noqa: PYI019 (typing.Self is 3.11+)
        named = cls.named()
        typed = {k: cls._read(k, v) for k, v in d.items() if k in named}
        return cls(keys_=tuple(d), rest_={k: v for k, v in d.items() if k not in named}, **typed)

    @classmethod
    def _read(cls, key: str, value: Any) -> Any:
        kind = cls.NESTED.get(key)
        if kind is None or not isinstance(value, list) or not all(isinstance(x, Mapping) for x in value):
            return value  # as the worker wrote it (an older worker's shape stays readable, and is written back)
        return tuple(kind.from_dict(x) for x in value)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object this record was read from."""
        named = self.named()
        return {k: self._write(k, getattr(self, k)) if k in named else self.rest_[k] for k in self.keys_}

    def _write(self, key: str, value: Any) -> Any:
        if key in self.NESTED and isinstance(value, tuple):  # read from a list of objects by _read
            return [x.to_dict() for x in value]
        return value

    def has(self, key: str) -> bool:
        """Whether the worker wrote `key` (a field reads None both when it wrote null and when it wrote nothing)."""
        return key in self.keys_


@dataclass(frozen=True)
class Closeness(Recorded):
    """The figures analysis.closeness judges a comparison of tensors by (worker: tensors.compare): the tolerances,
    each tensor's figures, the outputs not compared, the largest error, and what had no check, reference or yardstick.
    The Metrics of an aspect judged by that rule subclass it (numerics, compile, export)."""

    rtol: float | None = None
    atol: float | None = None
    per_tensor: Sequence[Mapping[str, Any]] | None = None  # one tensor's figures each
    uncompared: Sequence[str] | None = None
    max_abs_err: float | str | None = None  # "nan", "inf" as report.json writes them
    not_checked: Mapping[str, str] | None = None
    no_reference: Mapping[str, str] | None = None  # cross-backend: what the CPU had no reference for
    no_yardstick: str | None = None  # why the model's own rounding error could not be measured


@dataclass(frozen=True)
class Timed(Recorded):
    """A timed check's samples (ms each, the mean of `inner_loops` calls; `once_ms` the first, untimed call), and the
    median and IQR its rule derives from them. The Metrics of latency and compile-time subclass it."""

    samples_ms: Sequence[float] | None = None
    inner_loops: int | None = None
    once_ms: float | None = None
    median_ms: float | None = None
    iqr_ms: float | None = None


class Judged(NamedTuple):
    """What an aspect's judge decides: the outcome (model.Outcome), its one-line reason, the thresholds it applied,
    and figures the rule derived (added to the result's metrics after the worker's, in this order)."""

    outcome: Any
    reason: str
    thresholds: dict[str, Any]
    derived: Mapping[str, Any] = {}
