"""Reports -> the action's outputs: verdict, counts and the paths of what was written."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from torch_upgrade_check.model import Report
from torch_upgrade_check.report import merged_verdict, shared_count, total_counts
from torch_upgrade_check.report.unjudged import not_judged


def action_outputs(reports: Sequence[Report], paths: Mapping[str, str]) -> dict[str, str]:
    """verdict (error > failed > passed across reports), check counts, then `paths`.

    Counts are of checks only: a run that could not happen shows in `verdict` (error), not in `errors`.
    They leave a comparison's baseline out: it informs and does not decide. `suspicious` counts changes
    beyond a threshold that statistics could not confirm (they warn; `failed` and `verdict` ignore them);
    `shared-failures` how many of them are correctness failures the baseline shares at the same size (the model's
    own, not the upgrade's: analysis.shared). `not-judged` counts the candidate's cross-version checks skipped
    because the baseline failed them (they are in `skipped` too, and warn in the headline).
    """
    counts = total_counts(reports)
    outputs = {
        "verdict": merged_verdict(reports).value,
        "passed": str(counts["passed"]),
        "suspicious": str(counts["suspicious"]),
        "shared-failures": str(shared_count(reports)),
        "failed": str(counts["failed"]),
        "errors": str(counts["error"]),
        "skipped": str(counts["skipped"]),
        "not-run": str(counts["not-run"]),
        "total": str(sum(counts.values())),
        "not-judged": str(len(not_judged(reports))),  # skipped saved-aspect checks whose baseline failed them
    }
    clash = sorted(set(paths) & set(outputs))
    if clash:
        raise ValueError(f"path outputs {clash} would overwrite count outputs; name them differently")
    return {**outputs, **paths}


def error_outputs() -> dict[str, str]:
    """The outputs of a run that could not start (a bad input, say): verdict `error`, every count 0, no paths.

    The same names as action_outputs, so a later step or job reads them the same way either way.
    """
    return {**action_outputs([], {"report": "", "junit": "", "summary": ""}), "verdict": "error"}
