"""Where A/B latency noise lives on this machine: within a process pair (round to round) or between pairs.

  python benchmarks/noise.py [--python PY] [--pairs 8] [--only GLOB ...] [--out benchmarks/results]

An A/A experiment with compare's own machinery (orchestrate.measure): `--pairs` fresh baseline/candidate
worker pairs of the same interpreter, each measuring every selected latency check in 12 interleaved
rounds. Per check it reports the SD of the round log-ratios within a pair, the SD of the pair
estimates across pairs, and the part of the latter that round noise cannot explain (the per-pair
offset that Kalibera & Jones call process-level variation). Those numbers size compare's design: how
many agreeing pairs a failure needs, and how many rounds a pair measures. Writes noise.json and prints
a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
from pathlib import Path

from torch_upgrade_check import suite
from torch_upgrade_check.analysis import stats
from torch_upgrade_check.orchestrate import measure

HERE = Path(__file__).resolve().parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=sys.executable, help="interpreter with torch (both sides)")
    parser.add_argument("--pairs", type=int, default=8, help="fresh worker pairs (default 8)")
    parser.add_argument("--only", action="append", default=[], help="latency checks to measure (default: all)")
    parser.add_argument("--out", default=str(HERE / "results"), help="folder for noise.json")
    args = parser.parse_args()
    specs = [s for s in suite.plan(suite.BUILTIN, "cpu", args.only or ["latency"]) if s.aspect == "latency"]
    tmp = Path(tempfile.mkdtemp(prefix="tuc-noise-"))
    threads = measure.default_threads()
    pair = measure.Pair(args.python, args.python, tmp / "logs", threads, cpus=measure.pinned_cpus(threads)[0])
    tracks = {s.id: measure.Track(s, 0.10) for s in specs}
    for p in range(1, args.pairs + 1):
        with pair.start(p) as (b, c):
            for t in tracks.values():
                measure.measure_batch(t, b, c, timeout_s=300)
        print(f"pair {p}/{args.pairs} done", flush=True)
    rows = {}
    for check, t in tracks.items():
        per_pair = [bt.log_ratios() for bt in t.batches]
        within = statistics.mean(statistics.stdev(d) for d in per_pair if len(d) > 1)
        estimates = [stats.hodges_lehmann(d) for d in per_pair]
        between = statistics.stdev(estimates)
        expected = within / math.sqrt(statistics.mean(len(d) for d in per_pair))  # if pairs differed by rounds only
        offset = math.sqrt(max(0.0, between**2 - expected**2))
        rows[check] = {"within_round_sd": within, "between_pair_sd": between, "pair_offset_sd": offset,
                       "pair_estimates": estimates, "inner": t.inner}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "noise.json").write_text(json.dumps({"pairs": args.pairs, "rounds": measure.first_rounds("latency"),
                                                 "threads": pair.threads, "cpus": pair.cpus, "checks": rows}, indent=2))
    print("| check | round SD (within a pair) | pair SD | per-pair offset SD | largest pair offset |")
    print("| --- | --- | --- | --- | --- |")
    for check, r in rows.items():
        worst = max(abs(x) for x in r["pair_estimates"])
        print(f"| {check} | {r['within_round_sd']:.1%} | {r['between_pair_sd']:.1%} | {r['pair_offset_sd']:.1%} | "
              f"{math.expm1(worst):+.1%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
