"""Pure renderers of Reports (JUnit, Markdown summary, annotations, outputs) and the vocabulary they share."""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from torch_upgrade_check.analysis.shared import SHARED_KEY
from torch_upgrade_check.aspects import ASPECTS, FAIL_KINDS
from torch_upgrade_check.model import DEVICES, ABState, CheckResult, Outcome, Report, Side, Verdict

FAILING = frozenset({Outcome.FAILED, Outcome.ERROR, Outcome.NOT_RUN})
ATTENTION = FAILING | {Outcome.SUSPICIOUS}  # what the job summary shows open, before everything that passed
# the aspects whose failures `--fail-on correctness` counts: every registered aspect aspects.FAIL_KINDS does not
# give another kind (an aspect outside ASPECTS, such as environment[-]/device, keeps its own name in the headline)
CORRECTNESS_ASPECTS = frozenset(a for a in ASPECTS if a not in FAIL_KINDS)
# the A/B states, most urgent first: four, plus `undecided` (not settled within its budget; reports written
# before it was introduced say `suspicious` for it)
CHANGES = (ABState.REGRESSION, ABState.UNDECIDED, "suspicious", ABState.IMPROVED, ABState.UNCHANGED)
TIME_UNITS = (("ns", 1e-6), ("µs", 1e-3), ("ms", 1.0), ("s", 1e3))  # factors in milliseconds
BYTE_UNITS = (("B", 1.0), ("KiB", 1024.0), ("MiB", 1024.0**2), ("GiB", 1024.0**3))

# Characters that XML 1.0 forbids, that break a line-oriented format, or that disguise text:
# C0/C1 controls, bidi overrides and isolates, line/paragraph separators, lone surrogates, U+FFFE/U+FFFF.
_INVISIBLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff\ufffe\uffff]")
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def device_mismatch(report: Report) -> tuple[str, str] | None:
    """(what was asked, where the checks ran) when they differ: `--device auto` asks for the accelerator the run
    expected (report.json's environment.device_choice), written "auto (cuda)"; None when they agree."""
    if report.requested_device in DEVICES:
        asked = expected = report.requested_device
    else:
        choice = report.environment.get("device_choice")
        expected = str(choice.get("expected") or "") if isinstance(choice, dict) else ""
        asked = f"{report.requested_device} ({expected})"
    if not expected or expected == report.device:
        return None
    return asked, report.device


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


def deciding(reports: Sequence[Report]) -> list[Report]:
    """The reports whose checks decide the verdict: all but the baselines of comparisons.

    A baseline informs and never decides; rendered on its own (no other report beside it) it is a plain run.
    """
    decide = [r for r in reports if r.role != Side.BASELINE]
    return decide if decide else list(reports)


def merged_verdict(reports: Sequence[Report]) -> Verdict:
    """error beats failed beats passed, over the deciding reports; no reports at all means nothing ran, which fails.

    A baseline that could not run at all (infra_error) still makes it an error: without it there is no comparison.
    """
    verdicts = {r.verdict() for r in deciding(reports)}
    if Verdict.ERROR in verdicts or any(r.infra_error for r in reports):
        return Verdict.ERROR
    if Verdict.FAILED in verdicts or not verdicts:
        return Verdict.FAILED
    return Verdict.PASSED


# a correctness failure the baseline shares at the same size (analysis.shared): a warning, counted apart from suspicious
SHARED_WORDS = "the model's own, not the upgrade's"


def is_shared(result: CheckResult) -> bool:
    """A candidate's correctness failure that the baseline shares at the same size, left to warn."""
    return result.outcome is Outcome.SUSPICIOUS and isinstance(result.metrics.get(SHARED_KEY), Mapping)


def warning_word(result: CheckResult) -> str:
    """What a warning (a suspicious result) is called in annotations and JUnit."""
    if is_shared(result):
        return f"shared failure ({SHARED_WORDS})"
    return "undecided" if result.metrics.get("change") == ABState.UNDECIDED else "suspicious"


def shared_count(reports: Sequence[Report]) -> int:
    """The deciding reports' failures the baseline shares at the same size."""
    return sum(1 for report in deciding(reports) for r in report.results if is_shared(r))


def shared_phrase(n: int) -> str:
    """"2 failures the baseline shares (the model's own, not the upgrade's)"."""
    return f"{n} failure{'' if n == 1 else 's'} the baseline shares ({SHARED_WORDS})"


def total_counts(reports: Sequence[Report]) -> dict[str, int]:
    """Check outcomes summed over the deciding reports (baselines left out), every outcome present."""
    totals = {o.value: 0 for o in Outcome}
    for report in deciding(reports):
        for key, n in report.counts().items():
            totals[key] += n
    return totals


def run_names(reports: Sequence[Report]) -> list[str]:
    """A distinct display name per report: `device [role] label`, then the OS, then `#n` where still ambiguous."""
    names = [" ".join(p for p in (r.device, r.role, r.label) if p) for r in reports]
    if len(set(names)) < len(names):
        names = [f"{n} {r.environment.get('os', '')}".strip() for n, r in zip(names, reports)]
    if len(set(names)) < len(names):
        names = [f"{n} #{i + 1}" for i, n in enumerate(names)]
    return [one_line(n) for n in names]


def nothing_ran(report: Report) -> bool:
    """The run happened and failed, yet no check failed: the "nothing ran" verdict, which fails by default.

    Derived from Report.verdict() itself, so the renderers explain exactly the verdict the model gives.
    """
    counts = report.counts()
    failing = any(counts[o.value] for o in FAILING)
    return not report.infra_error and not failing and report.verdict() is Verdict.FAILED


def worst_tensor(metrics: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The compared tensor furthest from its golden: NaN first, then the largest RMSE relative to the tensor's
    scale, as the closeness verdict ranks them; None when the check compared no tensors."""
    tensors = metrics.get("per_tensor")
    tensors = [t for t in tensors if isinstance(t, Mapping)] if isinstance(tensors, list) else []

    def badness(t: Mapping[str, Any]) -> tuple[bool, float]:
        rmse, scale = number(t.get("rmse")), number(t.get("scale"))
        relative = (rmse or 0.0) / (scale if scale and math.isfinite(scale) else 1.0)
        return bool(number(t.get("nan"))), math.inf if math.isnan(relative) else relative

    return max(tensors, key=badness) if tensors else None


def sig(value: float) -> str:
    """Three significant digits, thousands separated, exponent only for the very small."""
    if not math.isfinite(value):
        return str(value)
    if value == 0:
        return "0"
    if abs(value) >= 999.5:
        return f"{value:,.0f}"
    return f"{value:.3g}" if abs(value) >= 0.01 else f"{value:.2e}"


def best_unit(values: Sequence[float | None], units: tuple[tuple[str, float], ...]) -> tuple[str, float]:
    """The unit that reads best for the middle of these values (so one table shares one unit)."""
    finite = [v for v in values if v is not None and math.isfinite(v) and v > 0]
    middle = statistics.median(finite) if finite else 0.0
    return next(((name, f) for name, f in reversed(units) if middle >= f), units[0])


def quantity(value: Any, kind: str) -> str:
    """A median in its own best unit: `quantity(13.2, "ms")` -> "13.2 ms", `quantity(2**30, "bytes")` -> "1 GiB"."""
    v = number(value)
    if v is None or not math.isfinite(v):
        return "?" if v is None else str(v)
    name, factor = best_unit([v], TIME_UNITS if kind == "ms" else BYTE_UNITS)
    return f"{sig(v / factor)} {name}"


def ratio_number(value: float) -> str:
    """A ratio near 1 with two decimals ("1.32", "0.80", "1.00"), so a column of them lines up."""
    return f"{value:.2f}" if math.isfinite(value) and 0.01 <= abs(value) < 1000 else sig(value)


def ratio_with_ci(metrics: Mapping[str, Any], *, compact: bool = False) -> str:
    """"1.32× (95% CI 1.25–1.40×)" (or, compact for table cells, "1.32× (1.25–1.40)") from a
    comparison's ratio, ci_low and ci_high; "" when there is no ratio."""
    ratio, low, high = (number(metrics.get(k)) for k in ("ratio", "ci_low", "ci_high"))
    if ratio is None or not math.isfinite(ratio):
        return ""
    if low is None or high is None or not (math.isfinite(low) and math.isfinite(high)):
        return f"{ratio_number(ratio)}×"
    if compact:
        return f"{ratio_number(ratio)}× ({ratio_number(low)}–{ratio_number(high)})"
    return f"{ratio_number(ratio)}× (95% CI {ratio_number(low)}–{ratio_number(high)}×)"


