"""History records -> series per runner and check, the alarms and labels a person reads (pure: no I/O).

A series is one check on one runner identity (IDENTITY_KEYS: CPU, GPU, driver, OS, machine): a ratio measured
on another machine is not comparable, so a new identity starts a new series and the summary says so.
What alarms: a step in a check's A/B ratios (analysis/changepoints.py) or a first failure (the newest run failed,
the one before passed). What does not alarm alone: a flaky check (it flips outcome more often than the history's
base rate) and a failure seen on one runner only (labelled as that host's).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from torch_upgrade_check.analysis import changepoints

# the identity's fields that decide a series (history/record.py writes them): a change in any of them starts a new one
# (the kernel and the runner's name change between runs of the same kind of machine: kept, but they do not split one)
IDENTITY_KEYS = ("cpu", "gpu", "driver", "os", "machine")
FAILING = frozenset({"failed", "error", "not-run"})
JUDGED = FAILING | {"passed", "suspicious"}  # skipped runs say nothing about a flip
FLAKY_MIN_FLIPS = 3
FLAKY_FACTOR = 2.0  # flips at more than twice the history's base rate (and at least one run in ten) is flaky
FLAKY_MIN_RATE = 0.1
FLAKY_WINDOW = 20  # flakiness is read over the newest runs: flips long ago do not excuse a failure now
THE_RUN = "the candidate's run"  # a run that judged nothing (the candidate could not install, import or run)


@dataclass(frozen=True)
class Point:
    """One run of one check: where it sits in the store, which torch it judged, what it found."""

    run: int  # index of the record in the store, oldest first
    when: str
    build: str  # the candidate's label for a person: "nightly 2026-12-03" or its version
    version: str
    outcome: str
    ratio: float | None


@dataclass(frozen=True)
class Finding:
    """What one check's series says now: its alarm (if any), and the words for the summary."""

    check: str
    runner: str
    kind: str  # "step" | "first-failure" | "flaky" | "host" | ""
    line: str
    last_good: Point | None = None
    first_bad: Point | None = None
    step: changepoints.Step | None = None

    @property
    def alarms(self) -> bool:
        return self.kind in ("step", "first-failure")


@dataclass
class History:
    """The newest runner's series, the findings on them, and how the store was read."""

    runner: str = ""
    runs: int = 0  # records on the newest runner's series
    series: dict[str, list[Point]] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # a new runner identity, records left out, ...
    base_flip_rate: float = 0.0  # flips per pair of successive runs, over every check of the series
    flip_counts: dict[str, tuple[int, int]] = field(default_factory=dict)
    build: str = ""  # the candidate build the newest run judged, and whether it is the run before's (build_line)

    def base_rate_without(self, check: str) -> float:
        """The base rate of the other checks: a flaky check must not raise the bar it is measured against."""
        flipped, pairs = self.flip_counts.get(check, (0, 0))
        all_flips = sum(f for f, _ in self.flip_counts.values()) - flipped
        all_pairs = sum(n for _, n in self.flip_counts.values()) - pairs
        return all_flips / all_pairs if all_pairs else 0.0

    @property
    def alarm(self) -> Finding | None:
        """The alarm to bisect: the earliest first bad build among the alarms (None without an alarm)."""
        alarms = [f for f in self.findings if f.alarms and f.first_bad is not None]
        return min(alarms, key=lambda f: f.first_bad.run) if alarms else None  # type: ignore[union-attr]


def runner_key(identity: dict[str, Any]) -> tuple[str, ...]:
    return tuple(str(identity.get(k) or "") for k in IDENTITY_KEYS)


def runner_name(identity: dict[str, Any]) -> str:
    """A runner in a few words: its GPU (and driver) where it has one, else its CPU; then its OS."""
    device = f"{identity.get('gpu')} (driver {identity.get('driver')})" if identity.get("gpu") else identity.get("cpu")
    return f"{device or 'unknown machine'}, {identity.get('os') or 'unknown OS'}"


def build_label(torch: dict[str, Any]) -> str:
    if torch.get("build_date"):
        return f"nightly {torch['build_date']}"
    return str(torch.get("version") or torch.get("label") or "unknown torch")


def _build(record: dict[str, Any]) -> str:
    cand = (record.get("torch") or {}).get("candidate") or {}
    version = str(cand.get("version") or cand.get("label") or "an unnamed torch")
    return f"{version} (git {str(cand['git'])[:12]})" if cand.get("git") else version


def build_line(mine: Sequence[dict[str, Any]]) -> str:
    """Which candidate build the newest run judged, and whether it is another build than the run before on this
    runner (version and commit): a series that steps on a changed build points at the build, not the runner."""
    if not mine:
        return ""
    now = _build(mine[-1])
    if len(mine) == 1:
        return f"candidate build {now}: the first run on this runner"
    before = _build(mine[-2])
    if before == now:
        return f"candidate build {now}: the same as the run before"
    return f"candidate build changed: {now}, was {before} the run before"


def analyse(records: Sequence[dict[str, Any]]) -> History:
    """Findings for the newest record's runner: its series, their steps, first failures, flaky checks and host
    failures (a failure the other runners' newest runs of the same torch do not share)."""
    if not records:
        return History(notes=["the history holds no records yet"])
    newest = records[-1].get("identity") or {}
    key = runner_key(newest)
    history = History(runner=runner_name(newest))
    mine = [(i, r) for i, r in enumerate(records) if runner_key(r.get("identity") or {}) == key]
    history.runs = len(mine)
    history.build = build_line([r for _, r in mine])
    if len(mine) == 1 and len(records) > 1:
        before = records[-2].get("identity") or {}
        history.notes.append(f"new runner identity: {history.runner} (was {runner_name(before)}); its series "
                             "start here, earlier runs are not compared with it")
    for i, record in mine:
        for check, seen in sorted((record.get("checks") or {}).items()):
            history.series.setdefault(check, []).append(_point(i, record, seen))
    if records[-1].get("infra_error"):  # nothing was judged: every check of the series failed with the run
        for check in list(history.series) or [THE_RUN]:
            history.series.setdefault(check, []).append(_point(len(records) - 1, records[-1], {"outcome": "error"}))
    if not changepoints.available():
        history.notes.append(changepoints.MISSING)
    history.flip_counts = {check: flips(points) for check, points in history.series.items()}
    history.base_flip_rate = _base_flip_rate(history.series.values())
    for check, points in history.series.items():
        finding = _finding(check, points, history, records)
        if finding is not None:
            history.findings.append(finding)
    return history


def _point(i: int, record: dict[str, Any], seen: dict[str, Any]) -> Point:
    cand = (record.get("torch") or {}).get("candidate") or {}
    ratio = seen.get("ratio")
    ratio = float(ratio) if isinstance(ratio, (int, float)) and math.isfinite(ratio) and ratio > 0 else None
    return Point(i, str(record.get("when") or ""), build_label(cand), str(cand.get("version") or ""),
                 str(seen.get("outcome") or "error"), ratio)


def flips(points: Sequence[Point]) -> tuple[int, int]:
    """(outcome flips between failing and passing, pairs of successive judged runs)."""
    judged = [p.outcome in FAILING for p in points if p.outcome in JUDGED]
    pairs = list(itertools.pairwise(judged))
    return sum(a != b for a, b in pairs), len(pairs)


def _base_flip_rate(all_points: Any) -> float:
    total = [flips(points) for points in all_points]
    pairs = sum(n for _, n in total)
    return sum(f for f, _ in total) / pairs if pairs else 0.0


def is_flaky(points: Sequence[Point], base_rate: float) -> bool:
    """Flips at least FLAKY_MIN_FLIPS times, and more often than FLAKY_FACTOR times the base rate (and FLAKY_MIN_RATE)."""
    n_flips, pairs = flips(points)
    return n_flips >= FLAKY_MIN_FLIPS and n_flips / pairs > max(FLAKY_FACTOR * base_rate, FLAKY_MIN_RATE)


def _finding(check: str, points: list[Point], history: History, records: Sequence[dict[str, Any]]) -> Finding | None:
    aspect = check.rsplit("/", 1)[-1]
    newest = points[-1]
    ratios = [p for p in points if p.ratio is not None]
    # a step names its own first bad run, which may come before the first failing one: it is asked first, and a
    # check's flips of outcome do not hide a step of its ratio
    asks = bool(ratios) and ratios[-1] is newest and changepoints.available()
    step = changepoints.latest_step([p.ratio for p in ratios]) if asks else None  # type: ignore[misc]
    if step is not None:
        first_bad, last_good = ratios[step.index], ratios[step.index - 1]
        return Finding(check, history.runner, "step", f"{check}: {aspect} {step.factor:.2f}x since {first_bad.build} "
                       f"(last good {last_good.build})", last_good=last_good, first_bad=first_bad, step=step)
    base = history.base_rate_without(check)
    recent = points[-FLAKY_WINDOW:]
    if is_flaky(recent, base):
        n_flips, pairs = flips(recent)
        return Finding(check, history.runner, "flaky", f"{check}: flaky ({n_flips} flips in {pairs + 1} runs, the "
                       f"other checks' rate {base:.0%}); not alarmed on alone")
    # a failure is judged when it starts, and again on each run while it was labelled the host's alone (another
    # runner failing it too makes it an alarm)
    again = len(points) > 1 and points[-2].outcome in FAILING and bool(_other_runners_pass(check, points[-2], records))
    if newest.outcome in FAILING and (len(points) == 1 or points[-2].outcome not in FAILING or again):
        good = next((p for p in reversed(points[:-1]) if p.outcome not in FAILING), None)
        others = _other_runners_pass(check, newest, records)
        if others:
            return Finding(check, history.runner, "host", f"{check}: {newest.outcome} on {history.runner} only "
                           f"({', '.join(others)} passed {newest.build}): this host's, not alarmed on alone")
        since = f" (last good {good.build})" if good else " (no good run on this runner yet)"
        first_bad = points[points.index(good) + 1] if good else points[0]  # where the failing streak starts
        return Finding(check, history.runner, "first-failure", f"{check}: {newest.outcome} since {first_bad.build}{since}",
                       last_good=good, first_bad=first_bad)
    return None


def _other_runners_pass(check: str, newest: Point, records: Sequence[dict[str, Any]]) -> list[str]:
    """The other runners whose newest run of the same candidate torch passed this check."""
    mine = runner_key(records[newest.run].get("identity") or {})
    seen: dict[tuple[str, ...], str] = {}
    for record in records:
        identity = record.get("identity") or {}
        key = runner_key(identity)
        cand = (record.get("torch") or {}).get("candidate") or {}
        outcome = ((record.get("checks") or {}).get(check) or {}).get("outcome")
        if key != mine and str(cand.get("version") or "") == newest.version and outcome in JUDGED:
            seen[key] = runner_name(identity) if outcome not in FAILING else ""
    return sorted(name for name in seen.values() if name)


def summary_lines(history: History) -> list[str]:
    """The lines for the job summary: notes first, then alarms, then flaky and host labels."""
    order = {"step": 0, "first-failure": 0, "host": 1, "flaky": 2}
    return [*history.notes, *(f.line for f in sorted(history.findings, key=lambda f: (order[f.kind], f.check)))]
