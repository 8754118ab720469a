"""The cross-version aspect's typed metrics and rule (pure): the candidate's outputs by the closeness rule against the
baseline's fp64 golden, the baseline's own error the reference, and its own fp64 golden unchanged from the
baseline's. The baseline's save passes once written (`saved_for_the_candidate`), and a failure leads with where the
candidate first left the baseline: the first aten op that changed and the first divergent module (`first_divergence`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from torch_upgrade_check.analysis import closeness
from torch_upgrade_check.aspects._metrics import Judged
from torch_upgrade_check.aspects.numerics.judge import Metrics as Closeness
from torch_upgrade_check.aspects.numerics.judge import closeness_of
from torch_upgrade_check.model import CheckResult, CheckSpec, Outcome


@dataclass(frozen=True)
class Metrics(Closeness):
    """The candidate's comparison (worker: aspects.cross_version.run): numerics' figures against the baseline's golden,
    and against the baseline's own outputs; the baseline's save writes `saved`, `tensors` and its op recording's."""

    baseline_torch: str | None = None
    bitwise_equal_to_baseline: bool | None = None
    max_abs_diff_vs_baseline: float | str | None = None
    mismatched_vs_baseline: int | None = None
    fp64_vs_baseline: Mapping[str, Any] | None = None  # this torch's fp64 golden against the baseline's
    first_divergent_module: Mapping[str, Any] | None = None  # {"module", "max_abs_err"}
    first_divergent_op: Mapping[str, Any] | None = None  # worker.opreplay.first_changed's figures
    first_divergent_op_error: str | None = None
    saved: str | None = None  # the baseline's save: the file written


def judge(m: Metrics, spec: CheckSpec) -> Judged:
    """The closeness rule against the baseline's golden; a changed fp64 golden fails it too, said first if it passed."""
    outcome, reason, thresholds = closeness.judge(closeness_of(m), spec.aspect, spec.dtype)
    changed = closeness.fp64_change({"fp64_vs_baseline": m.fp64_vs_baseline})
    if changed:
        reason = f"{changed}; {reason}" if outcome is Outcome.PASSED else f"{reason}; {changed}"
        outcome = Outcome.FAILED
    return Judged(outcome, reason, thresholds)


def saved_for_the_candidate(m: Metrics) -> str:
    """The reason the baseline's save (mode "save") passes with, once its worker wrote the file."""
    return f"outputs saved for the candidate ({m.tensors} tensors)"


def first_divergence(r: CheckResult) -> CheckResult:
    """A failed check led by the first aten op that changed (its standalone repro after the check's own) and ended by
    the first module whose output diverged: what a reader of a failed cross-version check needs first."""
    if r.outcome is not Outcome.FAILED:
        return r
    m = Metrics.from_dict(r.metrics)
    first, op = m.first_divergent_module, m.first_divergent_op
    if first:
        r = replace(r, reason=f"{r.reason}; first divergent module: {first['module']} "
                              f"(max abs err {first['max_abs_err']:.3g})")
    if isinstance(op, dict):
        r = replace(r, reason=f"{first_op_line(op)}; {r.reason}")
        if op.get("repro"):
            r = replace(r, repro=(f"{r.repro.rstrip()}\n# the first aten op that changed, alone (in the report "
                                  f"folder, with the baseline's inputs):\n{op['repro']}").lstrip("\n"))
    return r


def first_op_line(op: Mapping[str, Any]) -> str:
    """The first aten op whose output, on the baseline's recorded inputs, left the tolerance."""
    if not op.get("op"):
        bound = " (the recording was truncated: a later op may have changed)" if op.get("truncated") else ""
        calls = op.get("calls_changed")
        where = (f"; the ops called changed at op {int(calls.get('index', 0)) + 1}: the baseline called "
                 f"{calls.get('baseline')}, the candidate {calls.get('candidate')}" if isinstance(calls, dict) else "")
        return (f"no aten op's kernel changed on the baseline's inputs ({op.get('replayed')} of {op.get('of')} "
                f"replayed){bound}{where}")
    how = (f"raises {op['error']}" if op.get("error") else
           f"output {op.get('output')} off by max abs err {op.get('max_abs_err', float('nan')):.3g}")
    return (f"first aten op that changed: {op['op']} in {op.get('module')} (op {int(op.get('index', 0)) + 1} of "
            f"{op.get('of')}; inputs {', '.join(op.get('inputs') or []) or 'none'} -> "
            f"{', '.join(op.get('outputs') or []) or 'none'}): {how}")
