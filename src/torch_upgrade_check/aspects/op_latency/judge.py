"""The op-latency result's typed metrics, and why one side's timings alone decide nothing (pure).

compare judges an op-latency check op by op over both sides' rounds in fresh process pairs (orchestrate.optiming,
with analysis.optiming's rule) and writes its results itself; `judge` is reached only by a side's observation on
its own, which compares nothing: an error, never a pass.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from torch_upgrade_check.aspects._metrics import Judged, Recorded
from torch_upgrade_check.model import CheckSpec, Outcome

# it warns by design (a slower op it names is never a failure): it never makes a bisect step bad or unsettled
# (commands.bisect)
WARNS_BY_DESIGN = True


@dataclass(frozen=True)
class Metrics(Recorded):
    """The candidate's judgement: the ops compared (slowest first), those named slower, what was not timed (and what
    the candidate alone could not time), and the pairs and rounds measured."""

    ops: Sequence[Mapping[str, object]] | None = None
    slower_ops: Sequence[str] | None = None
    ops_timed: int | None = None
    ops_not_timed: Mapping[str, str] | None = None
    ops_failed_on_candidate: Mapping[str, str] | None = None
    pairs: int | None = None
    rounds: int | None = None
    max_timed: int | None = None


def judge(m: Metrics, spec: CheckSpec) -> Judged:
    return Judged(Outcome.ERROR, f"no rule for aspect {spec.aspect!r} on one side's timings: compare judges its ops "
                                 "across both sides' pairs (orchestrate.optiming)", {})
