"""The compile-time rule (pure): the cold compiles' median and spread, recorded; passes when one was timed
(compare judges it A/B, as latency: analysis.abjudge)."""

from __future__ import annotations

from dataclasses import dataclass

from torch_upgrade_check.analysis import stats
from torch_upgrade_check.analysis.verdicts import format_ms
from torch_upgrade_check.aspects._metrics import Judged, Timed
from torch_upgrade_check.model import CheckSpec, Outcome

# its repro command repeats its row's switch (--compile-time) where it was on: --only alone plans it on no workload that
# does not list it (commands.argv.repro_command)
REPRO_SWITCH = True


@dataclass(frozen=True)
class Metrics(Timed):
    """The cold compiles' times (ms, each in a fresh Inductor cache), and the median and IQR the rule derives."""

    cache: str | None = None


def judge(m: Metrics, spec: CheckSpec) -> Judged:
    samples = [float(x) for x in m.samples_ms or []]
    med = stats.median(samples)
    derived = {"median_ms": med, "iqr_ms": stats.iqr(samples)}
    if not samples:
        return Judged(Outcome.FAILED, "no compile was timed", {}, derived)
    return Judged(Outcome.PASSED, f"cold compile median {format_ms(med)} ({len(samples)} compiles, a fresh Inductor "
                                  f"cache each)", {}, derived)
