"""The api aspect's typed metrics and rule (pure): the torch names the team's files use (host.py's scan), as each side's
torch answered for them (apinames.py), judged: a name the baseline has and the candidate lacks fails, named with its
first uses, unless every use is guarded by the team's code (suspicious); one that newly warns or lost a parameter is
suspicious; one neither side has is the team's own (reported, not judged); without a baseline, a missing name is
suspicious."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from torch_upgrade_check.analysis.closeness import plural_of
from torch_upgrade_check.aspects._metrics import Recorded
from torch_upgrade_check.aspects._stack import Built, by_side, listed
from torch_upgrade_check.model import CheckResult, Outcome

ASPECT = "api"
LISTED = 5
SHOWN_USES = 3

Uses = dict[str, list[str]]  # dotted torch name -> ["file.py:LINE", ...]
Guards = dict[str, dict[str, str]]  # dotted torch name -> {"file.py:LINE": what guards that use}



@dataclass(frozen=True)
class Metrics(Recorded):
    """The api check's metrics (judge_sides writes them; host.py adds TorchFix's): each name's uses and answer, and
    the candidate's names by what became of them."""

    uses: Mapping[str, Sequence[str]] | None = None
    names: Mapping[str, Mapping[str, Any]] | None = None  # name -> exists, parameters, warns, error, missing
    missing: Sequence[str] | None = None
    gone: Sequence[str] | None = None
    gone_guarded: Sequence[str] | None = None
    guarded: Mapping[str, Mapping[str, str]] | None = None
    warned: Sequence[str] | None = None
    narrowed: Sequence[str] | None = None
    missing_on_both: Sequence[str] | None = None


@dataclass(frozen=True)
class Scanned:
    """The scan's answer: every torch name with its uses, and the uses the team's code guards (host_guards.py)."""

    uses: Uses
    guards: Guards


def guarded_only(scanned: Scanned, name: str) -> dict[str, str]:
    """{file:LINE: guard} when every use of the name is guarded, else {} (one unguarded use is enough to break)."""
    guarded = scanned.guards.get(name, {})
    uses = scanned.uses.get(name, [])
    return guarded if uses and all(w in guarded for w in uses) else {}


def _uses(uses: Uses, name: str) -> str:
    where = uses.get(name, [])
    more = f" and {len(where) - SHOWN_USES} more" if len(where) > SHOWN_USES else ""
    return ", ".join(where[:SHOWN_USES]) + more


@dataclass(frozen=True)
class Findings:
    """The candidate's names against the baseline's: what fails, what warns, what neither side has."""

    gone: list[str]
    warned: list[str]
    narrowed: list[str]
    neither: list[str]


def compare_answers(base: Mapping[str, Any], cand: Mapping[str, Any]) -> Findings:
    gone, warned, narrowed, neither = [], [], [], []
    for name, c in sorted(cand.items()):
        b = base.get(name, {})
        if not c.get("exists"):
            (gone if b.get("exists") else neither).append(name)
            continue
        if set(c.get("warns", [])) - set(b.get("warns", [])):
            warned.append(name)
        before, now = b.get("parameters"), c.get("parameters")
        if b.get("exists") and before is not None and now is not None and set(before) - set(now):
            narrowed.append(name)
    return Findings(gone, warned, narrowed, neither)


def _guarded_line(name: str, why: str, guarded: Mapping[str, str]) -> str:
    shown = [f"{where}: guarded by {guard}" for where, guard in list(guarded.items())[:LISTED]]
    more = f" and {len(guarded) - LISTED} more" if len(guarded) > LISTED else ""
    return f"{name} ({why}) at " + ", ".join(shown) + more


def judge_sides(uses: Uses, answers: Mapping[str, Mapping[str, Any]], *, device: str, repro: str, seconds: float = 0.0,
          baseline_label: str = "", guards: Guards | None = None) -> dict[str, CheckResult]:
    """Each side's `stack[-]/api` result; the candidate's against the baseline's answers when there is one. A name
    the candidate lacks whose every use the team's code guards (`guards`, host_guards.py) is suspicious, not failed."""
    scanned = Scanned(uses, guards or {})
    result = Built(CheckResult, ASPECT, device, repro, seconds)

    def missing(name: str, side: Mapping[str, Any]) -> str:
        a = side[name]
        why = a.get("error") or f"{a.get('missing', name)} does not exist"
        guarded = guarded_only(scanned, name)
        if guarded:
            return _guarded_line(name, why, guarded)
        some = scanned.guards.get(name, {})  # the unguarded uses are the ones that break: named first
        bare = [w for w in uses.get(name, []) if w not in some]
        also = f" ({plural_of(len(some), 'more use')} guarded)" if some else ""
        return f"{name} at {_uses({name: bare}, name)}{also}: {why}"

    def baseline(base: Mapping[str, Any]) -> CheckResult:
        absent = [n for n, a in base["names"].items() if not a.get("exists")]
        return result(Outcome.PASSED, f"{len(base['names']) - len(absent)} of {len(base['names'])} torch names your "
                      f"code uses exist with torch {base.get('torch', '?')}", {"uses": uses, "names": base["names"]},
                      [missing(n, base["names"]) for n in absent])

    def alone(cand: Mapping[str, Any]) -> CheckResult:
        absent = [n for n, a in cand["names"].items() if not a.get("exists")]
        lines = [missing(n, cand["names"]) for n in absent]
        reason = (f"{len(absent)} of {len(cand['names'])} torch names your code uses do not exist with torch "
                  f"{cand.get('torch', '?')} (no baseline says whether they did before): {listed(lines, LISTED)}" if absent else
                  f"all {len(cand['names'])} torch names your code uses exist")
        return result(Outcome.SUSPICIOUS if absent else Outcome.PASSED, reason,
                      {"uses": uses, "names": cand["names"], "missing": absent}, lines)

    def against(base: Mapping[str, Any], cand: Mapping[str, Any]) -> CheckResult:
        return _against(base, cand, scanned, baseline_label, result, missing)

    return by_side(answers, baseline=baseline, alone=alone, against=against)


def _against(base: Mapping[str, Any], cand: Mapping[str, Any], scanned: Scanned, baseline_label: str,
             result: Built[CheckResult], missing: Callable[[str, Mapping[str, Any]], str]) -> CheckResult:
    """The candidate's result against the baseline's answers."""
    uses = scanned.uses
    f = compare_answers(base["names"], cand["names"])
    since = f" with baseline {baseline_label}" if baseline_label else " on the baseline"
    handled = [n for n in f.gone if guarded_only(scanned, n)]  # the team's code falls back: its own handling
    failing = [n for n in f.gone if n not in handled]
    gone = [missing(n, cand["names"]) for n in failing]
    fallbacks = [missing(n, cand["names"]) for n in handled]
    warned = [f"{n} at {_uses(uses, n)} now warns: "
              + "; ".join(sorted(set(cand["names"][n]["warns"]) - set(base["names"][n].get("warns", []))))
              for n in f.warned]
    narrowed = [f"{n} at {_uses(uses, n)} lost parameters "
                + ", ".join(p for p in base["names"][n]["parameters"] if p not in cand["names"][n]["parameters"])
                for n in f.narrowed]
    neither = [f"{n} at {_uses(uses, n)}" for n in f.neither]
    metrics = {"uses": uses, "names": cand["names"], "gone": failing, "gone_guarded": handled,
               "guarded": {n: guarded_only(scanned, n) for n in handled}, "warned": f.warned, "narrowed": f.narrowed,
               "missing_on_both": f.neither}
    details = [*gone, *fallbacks, *warned, *narrowed,
               *(f"missing{since} too (your code's own, not judged): {n}" for n in neither)]
    also = (f"; {len(neither)} missing{since} too (your code's own names or typos, not judged): "
            + listed(neither, LISTED)) if neither else ""
    verb = "exists" if len(fallbacks) == 1 else "exist"
    handled_by_team = (f"{plural_of(len(fallbacks), 'torch name')} your code uses {verb}{since} and not here, every "
                       f"use guarded by your code (its fallback runs instead): {listed(fallbacks, LISTED)}")
    if gone:
        verb = "exists" if len(gone) == 1 else "exist"
        reason = f"{plural_of(len(gone), 'torch name')} your code uses {verb}{since} and not here: {listed(gone, LISTED)}"
        reason += f"; {handled_by_team}" if fallbacks else ""
        outcome = Outcome.FAILED
    elif fallbacks or warned or narrowed:
        reason = "; ".join([*([handled_by_team] if fallbacks else []),
                            *([f"changed: {listed([*warned, *narrowed], LISTED)}"] if warned or narrowed else [])])
        outcome = Outcome.SUSPICIOUS
    else:
        reason = f"every torch name your code uses{since} exists here ({len(cand['names']) - len(neither)} names)"
        outcome = Outcome.PASSED
    return result(outcome, reason + also, metrics, details)
