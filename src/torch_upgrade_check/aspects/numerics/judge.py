"""The numerics aspect's typed metrics and rule (pure): every tensor of the forward and backward within tolerance of
the fp64 golden, or within the closeness rule's bounds (analysis.closeness: the reference's error, the dtype's
rounding, the model's own rounding error). Its Metrics, a tensor-by-tensor comparison, is cross-backend's and
cross-version's too (they add what is theirs)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from torch_upgrade_check.analysis import closeness
from torch_upgrade_check.aspects._metrics import Closeness, Judged
from torch_upgrade_check.model import CheckSpec

# what analysis.closeness.judge reads of a check's metrics: each a field of its base, _metrics.Closeness
CLOSENESS_KEYS = ("rtol", "atol", "per_tensor", "uncompared", "not_checked", "no_reference", "no_yardstick",
                  "max_abs_err")


@dataclass(frozen=True)
class Metrics(Closeness):
    """A comparison with the fp64 golden, tensor by tensor (worker: tensors.compare), the tolerances it used and what
    it could not check."""

    numel: int | None = None
    tensors: int | None = None
    max_rel_err: float | str | None = None
    mismatched_count: int | None = None
    mismatched_share: float | None = None
    nan_count: int | None = None
    top_mismatches: Sequence[Mapping[str, Any]] | None = None
    model_unit: float | None = None
    sdpa_backend: str | None = None  # numerics of an attention workload: the backend the default dispatch picks


def closeness_of(m: Metrics) -> dict[str, Any]:
    """The figures analysis.closeness judges, read from the typed fields the worker wrote."""
    return {k: getattr(m, k) for k in CLOSENESS_KEYS if m.has(k)}


def judge(m: Metrics, spec: CheckSpec) -> Judged:
    """The closeness rule, against the aspect's reference (analysis.closeness.REFERENCE: none for numerics but TF32)."""
    outcome, reason, thresholds = closeness.judge(closeness_of(m), spec.aspect, spec.dtype)
    return Judged(outcome, reason, thresholds)
