"""Checks the candidate could not judge because the baseline failed them: named in the headline.

The candidate judges a cross-version check (and every aspect compare holds to the baseline's saves:
aspects.SAVED_ASPECTS) against what the baseline saved; where the baseline's own check failed, crashed or did not
run, there is nothing to compare with and a candidate's check that was skipped for it compared nothing. Those
checks compared nothing, so a run must not look green without saying so (issue 46: "a PASSED that compared nothing
is the worst outcome"). They do not fail the run: the fault is the baseline's, the candidate's other checks of the
same workloads still judged it, and an upgrade away from a broken baseline must stay possible. The headline warns
(`⚠️ passed: … ; 3 cross-version checks not judged: the baseline failed them`) and the `not-judged` output counts
them.
"""

from __future__ import annotations

from collections.abc import Sequence

from torch_upgrade_check.aspects import APART_ASPECTS, SAVED_ASPECTS
from torch_upgrade_check.model import CheckResult, Outcome, Report
from torch_upgrade_check.report.comparison import pairs

_BASELINE_BROKE = (Outcome.FAILED, Outcome.ERROR, Outcome.NOT_RUN)


def not_judged(reports: Sequence[Report]) -> list[CheckResult]:
    """Each candidate's checks of a saved aspect that were skipped where its baseline's same check did not pass."""
    found = []
    for candidate, baseline in pairs(reports):
        if baseline is None:
            continue
        broke = {r.id for r in reports[baseline].results if r.outcome in _BASELINE_BROKE}
        found += [r for r in reports[candidate].results
                  if r.aspect in SAVED_ASPECTS and r.outcome is Outcome.SKIPPED and r.id in broke]
    return found


def not_judged_note(found: Sequence[CheckResult]) -> str:
    """The headline's words for them: "3 cross-version checks not judged: the baseline failed them" ("checks judged
    against the baseline" where other aspects are among them); '' for none."""
    count = len(found)
    if not count:
        return ""
    aspects = {r.aspect for r in found}  # one aspect judged only against the baseline's saves is named (cross-version)
    kind = found[0].aspect if len(aspects) == 1 and aspects <= set(APART_ASPECTS) else "baseline-judged"
    checks = f"1 {kind} check" if count == 1 else f"{count} {kind} checks"
    return f"{checks} not judged: the baseline failed {'it' if count == 1 else 'them'}"
