"""Pure renderers of Reports (JUnit, Markdown summary, annotations, outputs) and the vocabulary they share."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from torch_upgrade_check.model import Outcome, Report, Verdict

FAILING = frozenset({Outcome.FAILED, Outcome.ERROR, Outcome.NOT_RUN})
CORRECTNESS_ASPECTS = frozenset({"numerics", "cross-backend", "compile", "determinism", "fsdp2"})

# Characters that XML 1.0 forbids, that break a line-oriented format, or that disguise text:
# C0/C1 controls, bidi overrides and isolates, line/paragraph separators, lone surrogates, U+FFFE/U+FFFF.
_INVISIBLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff\ufffe\uffff]")
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def visible(text: str, *, keep: str = "") -> str:
    """Replace invisible and XML-illegal characters (except those in `keep`) by `\\n`, `\\x00`, `\\u202e` escapes."""

    def escape(m: re.Match[str]) -> str:
        ch = m.group()
        if ch in keep:
            return ch
        code = ord(ch)
        return _NAMED.get(ch) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")

    return _INVISIBLE.sub(escape, str(text))


def one_line(text: str) -> str:
    """Whitespace runs (newlines included) become one space; what stays invisible is escaped."""
    return visible(" ".join(str(text).split()))


def clip(text: str, limit: int) -> str:
    """At most `limit` characters, ending in an ellipsis when cut."""
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


def number(value: Any) -> float | None:
    """A metric as a float ("nan"/"inf" strings included), or None when it is not a number."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def finite_seconds(value: Any) -> float:
    """A duration usable in a report: finite, not negative, rounded to milliseconds."""
    v = number(value)
    return round(v, 3) if v is not None and math.isfinite(v) and v > 0 else 0.0


def merged_verdict(reports: Sequence[Report]) -> Verdict:
    """error beats failed beats passed; no reports at all means nothing ran, which fails."""
    verdicts = {r.verdict() for r in reports}
    if Verdict.ERROR in verdicts:
        return Verdict.ERROR
    if Verdict.FAILED in verdicts or not verdicts:
        return Verdict.FAILED
    return Verdict.PASSED


def total_counts(reports: Sequence[Report]) -> dict[str, int]:
    """Check outcomes summed over all reports, every outcome present."""
    totals = {o.value: 0 for o in Outcome}
    for report in reports:
        for key, n in report.counts().items():
            totals[key] += n
    return totals


def run_names(reports: Sequence[Report]) -> list[str]:
    """A distinct display name per report: `device label`, then the OS, then `#n` where still ambiguous."""
    names = [f"{r.device} {r.label}" for r in reports]
    if len(set(names)) < len(names):
        names = [f"{n} {r.environment.get('os', '')}".strip() for n, r in zip(names, reports)]
    if len(set(names)) < len(names):
        names = [f"{n} #{i + 1}" for i, n in enumerate(names)]
    return [one_line(n) for n in names]


def nothing_ran(report: Report) -> bool:
    """The run happened but no check passed or failed: the "nothing ran" verdict, which fails by default."""
    counts = report.counts()
    return not report.infra_error and not counts["passed"] and not any(counts[o.value] for o in FAILING)
