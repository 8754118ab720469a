"""compare's rule for a candidate failure the baseline shares: the model's own at the same size, or still the upgrade's
(pure).

A correctness check that failed on both sides the same way, by about as much, tells the team about its model (fp32
accumulation over many layers, a float16 model's own rounding), not about the upgrade. It is excused (a warning, not
a failure) only when all of these hold:
- the aspect's failure has a size (aspects.Aspect.sized: checks judged tensor by tensor against a golden);
- both sides' checks FAILED (an error, a crash, a timeout is never excused, nor is any other aspect's failure);
- both failed only by a size: neither side's check found a problem that is not an error beyond tolerance (NaN,
  a tensor produced but not compared, nothing compared, autocast without effect, the GradScaler's overflow
  handling, the fp64 golden changed since the baseline, an autocast step further from the golden than the
  baseline's). One the candidate alone has is a failure of another kind, the upgrade's; one both share is not
  the model's rounding, and fails as a failure that is not new;
- the same size: the candidate's worst error (the largest of each tensor's max abs error and RMS error, in units of
  that tensor's scale) is at most SHARED_FACTOR times the baseline's, and its elements outside tolerance at most
  SHARED_FACTOR times the baseline's plus SHARED_SLACK_ELEMENTS.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from torch_upgrade_check.analysis.closeness import as_float, fp64_change, judge_tensor, short
from torch_upgrade_check.aspects import ASPECT
from torch_upgrade_check.model import CheckResult, Outcome

# fp32 rounding across releases moves a failing model's worst error by a few tens of percent and its count of
# elements outside tolerance by a few (the real vit_tiny numerics: 11 elements of 5.5 million on three torches);
# a 0.1% kernel change (the harness's) puts a float32 error near 1e-3 of the scale, where a model's own rounding
# leaves it near 1e-5 (the vit_tiny gradient: 5.96e-7 at RMS 0.0575): a hundredfold
SHARED_FACTOR = 2.0
SHARED_SLACK_ELEMENTS = 16
SHARED_KEY = "shared_with_baseline"  # in an excused result's metrics: the baseline, its reason, the sizes


@dataclass(frozen=True)
class Size:
    """How much a failing check failed by: its worst error (in units of the tensor's scale), its elements outside
    tolerance, and the problems it found that are not a size."""

    worst: float
    outside: int
    problems: frozenset[str]


@dataclass(frozen=True)
class Shared:
    """Whether a candidate failure the baseline shares is the model's own (`same`), and the words that say why (after
    "also failed on baseline X")."""

    same: bool
    why: str


def size_of(result: CheckResult) -> Size | None:
    """The size of a failed check of a sized aspect; None for any other result (its failure is never excused)."""
    aspect = ASPECT.get(result.aspect)
    if result.outcome is not Outcome.FAILED or aspect is None or not aspect.sized:
        return None
    m = result.metrics
    tensors = list(_tensors(m))
    problems = set(_problems(m))
    if not tensors:
        problems.add("nothing compared")
    if any(t.get("nan") or t.get("nan_in_golden_only") for _, t in tensors):
        problems.add("NaN")
    worst = max((_error(t) for _, t in tensors), default=math.nan)
    outside = sum(int(t.get("mismatched") or 0) for _, t in tensors)
    return Size(worst, outside, frozenset(problems))


def judge_shared(baseline: CheckResult, candidate: CheckResult) -> Shared | None:
    """For a candidate check that failed as the baseline's did: the model's own (same kind, same size), or not and
    why; None where the rule does not apply (not both failed, or an aspect whose failure has no size)."""
    before, after = size_of(baseline), size_of(candidate)
    if before is None or after is None:
        return None
    new = sorted(after.problems - before.problems)
    if new:
        return Shared(False, f"but another way here: {', '.join(new)}: the upgrade's, so it fails")
    if after.problems:
        return Shared(False, f"with {', '.join(sorted(after.problems))} on both sides: not new, but not a size the "
                             f"model's rounding explains, so it fails")
    if before.problems:  # the baseline's failure has no size to hold this one against
        return Shared(False, f"with {', '.join(sorted(before.problems))} there: no size to compare with, so it fails")
    if math.isnan(before.worst) or math.isnan(after.worst):
        return Shared(False, "but its errors were not measured on both sides, so it fails")
    figures = (f"worst error {short(after.worst)} of the tensor's scale (baseline {short(before.worst)}), "
               f"{after.outside} elements outside tolerance (baseline {before.outside})")
    bound = SHARED_FACTOR * before.outside + SHARED_SLACK_ELEMENTS
    if after.worst > SHARED_FACTOR * before.worst or after.outside > bound:
        return Shared(False, f"but larger here: {figures}; the same size is at most {SHARED_FACTOR:g}× the "
                             f"baseline's worst error and {SHARED_FACTOR:g}× its elements outside tolerance "
                             f"+ {SHARED_SLACK_ELEMENTS}: the upgrade's, so it fails")
    return Shared(True, f"at the same size: {figures}")


def _tensors(m: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(autocast dtype or backend case, or "" at the top, tensor metrics) for each tensor the check compared."""
    for t in m.get("per_tensor") or []:
        yield "", t
    for key, sub in (m.get("checked") or {}).items():
        for t in (sub.get("per_tensor") or []) if isinstance(sub, Mapping) else []:
            yield str(key), t


def _problems(m: Mapping[str, Any]) -> Iterator[str]:
    """What a check found besides errors beyond tolerance: each is a failure of another kind than a size."""
    if m.get("uncompared"):
        yield "a tensor not compared"
    if fp64_change(m):
        yield "the fp64 golden changed since the baseline"
    for key, sub in (m.get("checked") or {}).items():
        if not isinstance(sub, Mapping):
            continue
        if sub.get("uncompared"):
            yield "a tensor not compared"
        if "per_tensor" in sub and not sub.get("per_tensor"):
            yield "nothing compared"
        if "low_precision_modules" in sub and not sub.get("low_precision_modules"):
            yield f"{key} autocast had no effect"
        if "overflow_scale" in sub and not (sub.get("overflow_skipped") and sub.get("overflow_backed_off")
                                            and sub.get("scaled_step_applied")):
            yield f"{key} GradScaler's overflow handling"
        if sub.get("nan_count"):
            yield "NaN"
        if m.get("mode") == "compare" and "low_precision_modules" in sub and _further_than_baseline(key, sub):
            yield f"{key} autocast step further from the golden than the baseline's"


def _further_than_baseline(dtype: str, sub: Mapping[str, Any]) -> bool:
    """amp in compare: a tensor of the candidate's autocast step beyond the cross-version rule of the baseline's."""
    rtol, atol = as_float(sub.get("rtol")), as_float(sub.get("atol"))
    return any(not judge_tensor(t, "cross-version", dtype, rtol, atol)[0] for t in sub.get("per_tensor") or [])


def _error(t: Mapping[str, Any]) -> float:
    """A tensor's worst error in units of its scale: the larger of its max abs error and its RMS error (NaN: none)."""
    scale = as_float(t.get("scale")) or 1.0
    found = [v for v in (as_float(t.get("max_abs_err")), as_float(t.get("rmse"))) if not math.isnan(v)]
    return max(found) / abs(scale) if found else math.nan
