"""Which change-point library splits the history: false alarms on A/A series, a 15% step's detection, cost.

Each candidate runs in an interpreter that has it installed (their dependencies conflict: Apache Otava pins numpy
2.2.0, MongoDB's signal-processing-algorithms wants numpy < 2 and Python 3.11), on the same seeded synthetic series
(canary_detector's), behind the same online alarm rule the product uses (analysis/changepoints.step_from, imported
from src/ beside this file): after each run the series is split and the newest change point may alarm.

    python benchmarks/changepoint_libraries.py --library ruptures     # one library, with this interpreter

The figures in docs/benchmarks.md ("Change points") came from one interpreter a library; results go to stdout as
one JSON line (and are appended to --out).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from canary_series import RUNS, series

from torch_upgrade_check.analysis import changepoints

HISTORIES = 60
FIRST = changepoints.MIN_RUNS


def ruptures_detector() -> Callable[[list[float]], list[int]]:
    return changepoints.change_points


def otava_detector() -> Callable[[list[float]], list[int]]:
    from otava.analysis import compute_change_points

    def detect(ratios: list[float]) -> list[int]:
        cps, _ = compute_change_points([math.log(r) for r in ratios], window_len=50, max_pvalue=0.001)
        return sorted(cp.index for cp in cps)
    return detect


def spa_detector() -> Callable[[list[float]], list[int]]:
    from signal_processing_algorithms.energy_statistics.energy_statistics import e_divisive

    def detect(ratios: list[float]) -> list[int]:
        return sorted(e_divisive([math.log(r) for r in ratios], pvalue=0.01, permutations=100))
    return detect


DETECTORS = {"ruptures": ruptures_detector, "otava": otava_detector, "spa": spa_detector}


def measure(name: str, histories: int) -> dict:
    detect = DETECTORS[name]()
    step = [1.0] * 10 + [2.0] * 10
    assert 10 in detect(step), f"{name} does not split an obvious step where it is: {detect(step)}"

    def alarm(ratios: list[float]) -> changepoints.Step | None:
        return changepoints.step_from(ratios, [c for c in detect(ratios) if 0 < c < len(ratios)])

    calls, started = 0, time.perf_counter()
    aa_alarms = 0
    for h in range(histories):
        ratios = series(1000 + h, None)
        for t in range(FIRST, RUNS + 1):
            calls += 1
            if alarm(ratios[:t]) is not None:
                aa_alarms += 1
                break
    delays, early = [], 0
    rng = random.Random(7)
    for h in range(histories):
        s = rng.randrange(15, RUNS - 6)
        ratios = series(5000 + h, s)
        for t in range(FIRST, s + 1):  # the runs before the step, as the canary ran them
            calls += 1
            if alarm(ratios[:t]) is not None:
                early += 1
                break
        for t in range(s + 1, s + 5):  # the step's run and the 3 after it
            calls += 1
            found = alarm(ratios[:t])
            if found is not None and abs(found.index - s) <= 3:
                delays.append(t - 1 - s)
                break
    seconds = time.perf_counter() - started
    return {"library": name, "aa_histories": histories, "aa_with_alarm": aa_alarms, "step_histories": histories,
            "alarm_before_step": early, "step_found_within_3": len(delays), "delays": sorted(delays),
            "calls": calls, "ms_per_call": round(1000 * seconds / calls, 2), "python": sys.version.split()[0]}


def main() -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--library", required=True, choices=sorted(DETECTORS))
    p.add_argument("--histories", type=int, default=HISTORIES)
    p.add_argument("--out", default="")
    p.add_argument("--penalty-k", type=float, default=None, help="ruptures: another penalty factor than the product's")
    args = p.parse_args()
    if args.penalty_k is not None:
        changepoints.PENALTY_K = args.penalty_k
    text = json.dumps(measure(args.library, args.histories))
    print(text)
    if args.out:
        with open(args.out, "a", encoding="utf-8") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
