"""The imports aspect's typed metrics and rule (pure): each side's modules, imported by host.py a process each,
judged: the candidate's against the baseline's (a module that imported there and does not here fails, named; one
new in the candidate's stack that does not import fails as new; one the team's pull request removed is reported),
a side alone by itself (a module that does not import is suspicious: nothing says it ever did)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from packaging.utils import canonicalize_name

from torch_upgrade_check.analysis.closeness import plural_of
from torch_upgrade_check.aspects._metrics import Recorded
from torch_upgrade_check.aspects._stack import Built, by_side, listed
from torch_upgrade_check.model import CheckResult, Outcome

ASPECT = "imports"
LISTED = 5


@dataclass(frozen=True)
class Metrics(Recorded):
    """The imports check's metrics (judge_sides writes them): each module's import, and the candidate's modules by
    what became of them."""

    modules: Mapping[str, Mapping[str, Any]] | None = None  # module -> distribution, version, status, error, seconds
    broken: Sequence[str] | None = None
    gone: Sequence[str] | None = None
    also_on_baseline: Sequence[str] | None = None
    new: Sequence[str] | None = None
    removed_by_team: Sequence[str] | None = None


@dataclass(frozen=True)
class Imported:
    """One module's import in one environment: ok, error (the exception's first line), signal, or timeout."""

    distribution: str
    version: str
    module: str
    status: str
    error: str = ""
    seconds: float = 0.0

    def says(self) -> str:
        return {"ok": "imports", "timeout": "hung", "signal": "crashed"}.get(self.status, "raised") + (
            f": {self.error}" if self.error else "")


def _entry(i: Imported) -> str:
    return f"{i.module} ({i.distribution} {i.version}) {i.says()}"


def _table(side: Mapping[str, Imported]) -> dict[str, dict[str, Any]]:
    return {m: {"distribution": i.distribution, "version": i.version, "status": i.status, "error": i.error,
                "seconds": i.seconds} for m, i in sorted(side.items())}


def judge_sides(done: Mapping[str, Mapping[str, Imported]], *, device: str, repro: str, seconds: float = 0.0,
          baseline_label: str = "", removed: Mapping[str, str] | None = None) -> dict[str, CheckResult]:
    """Each side's `stack[-]/imports` result; the candidate's judged against the baseline's imports when there is one.
    `removed`: the distributions the team's pull request removed (removed_by_team), reported when gone, not failed."""
    result = Built(CheckResult, ASPECT, device, repro, seconds)

    def baseline(base: Mapping[str, Imported]) -> CheckResult:
        bad = [i for i in base.values() if i.status != "ok"]
        return result(Outcome.PASSED, f"{len(base) - len(bad)} of {len(base)} modules import"
                      + (f"; not: {'; '.join(_entry(i) for i in bad[:LISTED])}" if bad else ""),
                      {"modules": _table(base)}, [_entry(i) for i in bad])

    def alone(cand: Mapping[str, Imported]) -> CheckResult:
        not_ok = [i for i in cand.values() if i.status != "ok"]
        outcome = Outcome.SUSPICIOUS if not_ok else Outcome.PASSED
        reason = (f"{len(not_ok)} of {len(cand)} modules do not import (no baseline says whether they did before): "
                  + "; ".join(_entry(i) for i in not_ok[:LISTED])) if not_ok else f"all {len(cand)} modules import"
        return result(outcome, reason, {"modules": _table(cand)}, [_entry(i) for i in not_ok])

    def against(base: Mapping[str, Imported], cand: Mapping[str, Imported]) -> CheckResult:
        not_ok = [i for i in cand.values() if i.status != "ok"]
        return _against_baseline(base, cand, not_ok, removed or {}, baseline_label, result, _table)

    return by_side(done, baseline=baseline, alone=alone, against=against)


def _against_baseline(base: Mapping[str, Imported], cand: Mapping[str, Imported], not_ok: list[Imported],
                      removed: Mapping[str, str], baseline_label: str, result: Callable[..., CheckResult],
                      table: Callable[[Mapping[str, Imported]], dict[str, dict[str, Any]]]) -> CheckResult:
    broke = [i for i in not_ok if base.get(i.module) is not None and base[i.module].status == "ok"]
    new = [i for i in not_ok if i.module not in base]  # only the candidate's stack has it: nothing to blame on before
    gone_all = [b for m, b in sorted(base.items()) if b.status == "ok" and m not in cand]
    dropped = [b for b in gone_all if canonicalize_name(b.distribution) in removed]
    gone = [b for b in gone_all if b not in dropped]
    still = [i for i in not_ok if i not in broke and i not in new]
    lines = [*(_entry(i) for i in broke), *(f"{b.module} ({b.distribution} {b.version}) is no longer installed"
                                            for b in gone)]
    fresh = [_entry(i) for i in new]
    since = f" with baseline {baseline_label}" if baseline_label else " with the baseline"
    also = f"; {len(still)} fail{since} too: " + "; ".join(_entry(i) for i in still[:LISTED]) if still else ""
    left = [_removed_entry(b, removed[canonicalize_name(b.distribution)]) for b in dropped]
    out = (f"; {len(left)} not installed here, removed by the team's pull request (not judged): {listed(left, LISTED)}"
           if left else "")
    metrics = {"modules": table(cand), "broken": [i.module for i in broke], "gone": [b.module for b in gone],
               "also_on_baseline": [i.module for i in still], "new": [i.module for i in new],
               "removed_by_team": [b.module for b in dropped]}
    details = "\n".join([*lines, *(f"new in the candidate's stack: {x}" for x in fresh),
                         *(f"removed by the team's pull request: {x}" for x in left),
                         *(f"also{since}: {_entry(i)}" for i in still)])
    failing = []
    if lines:
        failing.append(f"{len(lines)} of {len(base)} modules that import{since} do not here: {listed(lines, LISTED)}")
    if fresh:
        failing.append(f"{plural_of(len(fresh), 'module')} new in the candidate's stack (not installed{since}) "
                       f"{'does' if len(fresh) == 1 else 'do'} not import: {listed(fresh, LISTED)}")
    if failing:
        return result(Outcome.FAILED, "; ".join(failing) + also + out, metrics, details)
    return result(Outcome.PASSED, f"every module that imports{since} imports here "
                  f"({len(cand) - len(still)} of {len(cand)}){also}{out}", metrics, details)


def _removed_entry(b: Imported, root: str) -> str:
    """`tuc_gone (tuc-gone 1.0)`, or `idna (idna 3.10, with requests)` for a dependency that went with the removed."""
    went_with = f", with {root}" if root != canonicalize_name(b.distribution) else ""
    return f"{b.module} ({b.distribution} {b.version}{went_with})"
