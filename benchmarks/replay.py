"""What compare's A/B rules decide on the process pairs this machine measured: the detector benchmark's recorded
pairs, resampled through compare's own planner and rules, thousands of runs a cell.

  python benchmarks/replay.py [--results benchmarks/results/results.json] [--runs 2000] [--seed 1]
                              [--budget 20] [--set NAME=VALUE ...] [--out FILE]

Why: a live cell of 60 runs bounds a false-alarm rate only to a few percent (0 of 60: up to 6%; 1 of 60: 0.04-9%);
the rules' rate on one workload is a fraction of a percent. Each live run of the detector's sizes, bimodal and compile
parts keeps its fresh pairs' round log ratios (candidate over baseline, one a round); a replayed run is built from
them as compare builds one:

- its first pair is a recorded first pair of the cell, its later pairs recorded pairs of the cell long enough for
  the rounds asked (from their start: a pair's first rounds after its warm-up, as measure times them);
- the rounds are what measure's planner asks (`Track.plan`, the pair's cap, `Track.pair_is_full`) at the round cost
  and warm-up cost of the live run the first pair came from, within `--budget` (a compile-time check's own budget);
- after each pair `ab.decide` at one check's share of the run's false-alarm budget, as a one-check compare.

So the rates below are the current rules' (or those `--set` gives: `--set MIN_PAIRS=6 --set FAIL_PRIOR_DF=6`, any
upper-case constant of analysis/ab.py that is a number; LOOKS follows MIN_PAIRS and MAX_PAIRS, measure's confirmation
rounds follow CONFIRM_LEAST), on this machine's pairs. The one assumption: a run's pairs are independent draws. The
output tests it on each A/A cell: a run's second pair should not lean the way its first one did, nor lean at all; the
live runs' rate is printed beside the replayed one. Writes markdown to stdout (and --out).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from detector import as_batch, fails_by_default, rate

from torch_upgrade_check.analysis import ab, abjudge
from torch_upgrade_check.model import CheckSpec, Outcome
from torch_upgrade_check.orchestrate import measure
from torch_upgrade_check.orchestrate.compare import Thresholds

HERE = Path(__file__).resolve().parent
THRESHOLDS = Thresholds().by_aspect()


@dataclass(frozen=True)
class Cell:
    """One cell of the detector's results: its live runs' rows (one A/B check a run)."""

    label: str
    aspect: str
    rows: tuple[dict, ...]

    @property
    def aa(self) -> bool:
        return "A/A" in self.label

    def first_pairs(self) -> list[tuple[list[float], float, float]]:
        """Each live run's first pair, with that run's measuring seconds a round and warm-up seconds a pair."""
        out = []
        for row in self.rows:
            pairs = [p for p in row.get("pair_log_ratios") or [] if p]
            rounds = sum(len(p) for p in pairs)
            if pairs and rounds:
                out.append((pairs[0], row["seconds"] / rounds, (row.get("warm_seconds") or 0.0) / len(pairs)))
        return out

    def pairs(self) -> list[list[float]]:
        return [p for row in self.rows for p in row.get("pair_log_ratios") or [] if p]


def cells(results: dict) -> Iterator[Cell]:
    for size, by_effect in results.get("sizes", {}).items():
        for effect, runs in sorted(by_effect.items(), key=lambda kv: float(kv[0])):
            label = f"{size} +{float(effect):.1%}" if float(effect) else f"{size} A/A"
            yield Cell(label, "latency", tuple(r for run in runs for r in run["rows"]))
    for size, runs in results.get("bimodal", {}).items():
        yield Cell(f"{size} bimodal A/A", "latency", tuple(r for run in runs for r in run["rows"]))
    for key, runs in sorted((k, v) for k, v in (results.get("compile") or {}).items() if k != "check"):
        label = f"compile_fx +{float(key):.0%}" if float(key) else "compile A/A"
        yield Cell(label, "compile-time", tuple(r for run in runs for r in run["rows"]))


def replay_run(rng: random.Random, cell: Cell, firsts: Sequence[tuple[list[float], float, float]],
               pool: Sequence[list[float]], budget_s: float) -> ab.Decision:
    """One replayed compare of the cell's check (see the module docstring): its final decision."""
    decision = replay_track(rng, cell, firsts, pool, budget_s).decision
    assert decision is not None
    return decision


def replay_track(rng: random.Random, cell: Cell, firsts: Sequence[tuple[list[float], float, float]],
                 pool: Sequence[list[float]], budget_s: float) -> measure.Track:
    """One replayed compare of the cell's check, as measure's Track: its pairs, their seconds and its decision."""
    threshold = THRESHOLDS[cell.aspect]
    t = measure.Track(CheckSpec(cell.label, cell.aspect, "cpu", "float32"), threshold, budget_s=budget_s)
    first, per_round, warm = rng.choice(firsts)
    for k in range(1, measure.MAX_BATCHES + 1):
        wanted = t.next_rounds or measure.first_rounds(cell.aspect)
        if k == 1:
            series = first
        else:
            long_enough = [p for p in pool if len(p) >= wanted]
            series = rng.choice(long_enough or [max(pool, key=len)])
        cap, d = t.pair_cap(), []
        for r in range(min(wanted, len(series))):
            if t.pair_is_full(r, per_round * r, warm, cap):
                break
            d.append(series[r])
        t.batches.append(as_batch(d, seconds=per_round * len(d), warm_seconds=warm))
        t.next_rounds = t.plan()
        t.decision = ab.decide(t.batches, threshold, alpha=ab.run_alpha(1),
                               final=k == measure.MAX_BATCHES or not t.next_rounds)
        if t.decision.state != "pending":
            return t
    raise AssertionError("a replayed check still pending after its last pair")


def replay(cell: Cell, runs: int, seed: int, budget_s: float) -> dict[str, float] | None:
    """The tally of `runs` replayed compares: each final state, and `fails` (what compare fails by default); what
    they cost, `pairs_p50` and `seconds_p50` (measuring seconds, warm-ups included); and `ruled_out_p50`, the smallest
    change the `unchanged` ones ruled out (their 95% interval's upper end, a ratio; nan where none was)."""
    firsts, pool = cell.first_pairs(), cell.pairs()
    if not firsts:
        return None
    rng = random.Random(seed)
    tally: dict[str, float] = {"fails": 0}
    pairs, seconds, ruled_out = [], [], []
    for _ in range(runs):
        t = replay_track(rng, cell, firsts, pool, budget_s)
        d = t.decision
        assert d is not None
        tally[d.state] = tally.get(d.state, 0) + 1
        tally["fails"] += abjudge.outcome_of(d) is Outcome.FAILED
        pairs.append(d.batches)
        seconds.append(t.seconds)
        if d.state == "unchanged":
            ruled_out.append(d.ci_high)
    tally.update(pairs_p50=statistics.median(pairs), seconds_p50=statistics.median(seconds),
                 ruled_out_p50=statistics.median(ruled_out) if ruled_out else math.nan)
    return tally


def redecide(cell: Cell, row: dict) -> str:
    """A live run decided again on its own recorded pairs under the rules in force: `fails`, `passes`, or `unknown`
    (the rules would have measured a pair the run did not). Exact where the planner is unchanged (it reads only
    PAIR_SD and the budget of ab's constants; measure sizes a latency check's budget from its rounds' cost, which for
    the recorded workloads, at most 0.3 s a round, is --ab-budget itself): a look that was pending live is decided
    again as it was."""
    pairs = [p for p in row.get("pair_log_ratios") or [] if p]
    if not pairs:
        return "unknown"
    threshold = THRESHOLDS[cell.aspect]
    final_live = row["change"] == "undecided" or len(pairs) == measure.MAX_BATCHES
    batches = []
    for k, d in enumerate(pairs, 1):
        batches.append(as_batch(d))
        last = k == len(pairs)
        decision = ab.decide(batches, threshold, alpha=ab.run_alpha(1), final=last and final_live)
        if decision.state != "pending":
            return "fails" if abjudge.outcome_of(decision) is Outcome.FAILED else "passes"
    return "unknown"


@dataclass(frozen=True)
class Independence:
    """The replay's assumption tested on one A/A cell: the live runs that measured a second pair (runs), the
    correlation of their first and second pairs' estimates (r), the second pairs' mean log ratio and its t (a
    run-level offset would show in both)."""

    runs: int
    r: float = math.nan
    second_mean: float = math.nan
    t: float = math.nan

    def __str__(self) -> str:
        if self.runs < 4:
            return "fewer than 4 runs with a second pair"
        return f"{self.runs} runs: r = {self.r:+.2f}, second pairs' mean {self.second_mean:+.1%} (t {self.t:+.1f})"


def independence(cell: Cell) -> Independence:
    """The live runs' first and second pairs, as `Independence` (fewer than 4 such runs: only their number)."""
    two = [(as_batch(p[0]).estimate(), as_batch(p[1]).estimate())
           for p in ((row.get("pair_log_ratios") or []) for row in cell.rows) if len(p) >= 2 and p[0] and p[1]]
    if len(two) < 4:
        return Independence(len(two))
    second = [b for _, b in two]
    mean = statistics.mean(second)
    return Independence(len(two), statistics.correlation([a for a, _ in two], second), mean,
                        mean / (statistics.stdev(second) / math.sqrt(len(second))))


def bad_input(message: str) -> SystemExit:
    """A one-line error on stderr and exit code 2, as the tool's own CLI does."""
    print(f"replay: {message}", file=sys.stderr)
    return SystemExit(2)


def apply(settings: Sequence[str]) -> list[str]:
    """`NAME=VALUE` overrides of analysis/ab.py's numeric constants (and what follows from them); the lines that say
    which rules were replayed. Bad input: a one-line error, exit 2."""
    said = []
    for setting in settings:
        name, _, value = setting.partition("=")
        current = getattr(ab, name, None) if name.isupper() else None
        if not isinstance(current, (int, float)) or isinstance(current, bool):
            known = ", ".join(k for k, v in vars(ab).items() if k.isupper() and isinstance(v, (int, float)))
            raise bad_input(f"--set {setting}: not a numeric constant of analysis/ab.py (one of {known})")
        try:
            setattr(ab, name, type(current)(value))
        except ValueError:
            raise bad_input(f"--set {setting}: {value!r} is not a {type(current).__name__}") from None
        said.append(f"{name}={getattr(ab, name)}")
    ab.LOOKS = ab.MAX_PAIRS - ab.MIN_PAIRS + 1
    measure.MAX_BATCHES = ab.MAX_PAIRS
    return said


def render(results: dict, runs: int, seed: int, budget_s: float, said: Sequence[str]) -> str:
    rules = ", ".join(said) if said else "the current rules"
    lines = [f"Replayed compares ({runs} a cell, seed {seed}, --ab-budget {budget_s:g} s; {rules}: MIN_PAIRS "
             f"{ab.MIN_PAIRS}, MAX_PAIRS {ab.MAX_PAIRS}, PAIR_SD {ab.PAIR_SD:g}, FAIL_PAIR_SD {ab.FAIL_PAIR_SD:g}, "
             f"FAIL_PRIOR_DF {ab.FAIL_PRIOR_DF:g}, UNCHANGED_PAIR_SD {ab.UNCHANGED_PAIR_SD:g}, UNCHANGED_PRIOR_DF "
             f"{ab.UNCHANGED_PRIOR_DF:g}, CONFIRM_LEAST {ab.CONFIRM_LEAST}) on the recorded pairs of the detector "
             "benchmark:", "",
             "| cell | live runs: fails | live runs decided again: fail / pass / unknown | replayed: fails | undecided | "
             "improved | unchanged | unchanged: smallest change ruled out p50 | pairs / measuring s p50 | "
             "A/A: first and second pairs |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for cell in cells(results):
        tally = replay(cell, runs, seed, budget_s)
        if tally is None:
            continue
        live = rate(sum(fails_by_default(r) for r in cell.rows), len(cell.rows))
        again = [redecide(cell, r) for r in cell.rows]
        ruled = tally["ruled_out_p50"]
        lines.append(f"| {cell.label} | {live} | {again.count('fails')} / {again.count('passes')} / "
                     f"{again.count('unknown')} | {rate(int(tally['fails']), runs)} | {tally.get('undecided', 0):.0f} | "
                     f"{tally.get('improved', 0):.0f} | {rate(int(tally.get('unchanged', 0)), runs)} | "
                     f"{'—' if math.isnan(ruled) else f'{ruled - 1:+.1%}'} | {tally['pairs_p50']:g} / "
                     f"{tally['seconds_p50']:.1f} s | {independence(cell) if cell.aa else ''} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", default=str(HERE / "results" / "results.json"),
                        help="the detector benchmark's results.json")
    parser.add_argument("--runs", type=int, default=2000, help="replayed compares a cell (default 2000)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--budget", type=float, default=measure.DEFAULT_BUDGET_S,
                        help=f"--ab-budget of the replayed compares, seconds (default {measure.DEFAULT_BUDGET_S:g})")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="replay under another value of one of analysis/ab.py's constants (repeatable)")
    parser.add_argument("--out", default=None, help="also write the markdown here")
    args = parser.parse_args(argv)
    if args.runs < 1 or not args.budget > 0:
        parser.error("--runs takes a positive count and --budget a positive number of seconds")
    try:
        results = json.loads(Path(args.results).read_text())
    except (OSError, ValueError) as e:
        raise bad_input(f"cannot read {args.results} ({e}): run benchmarks/detector.py first, or pass --results"
                        ) from None
    said = apply(args.set)
    text = render(results, args.runs, args.seed, args.budget, said)
    sys.stdout.write(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


__all__ = ["Cell", "apply", "cells", "main", "redecide", "replay", "replay_run", "replay_track"]

if __name__ == "__main__":
    raise SystemExit(main())
