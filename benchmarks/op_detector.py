"""How well one slower aten op is named (issue 35): the latency attribution's top op and op-latency's suspicious op,
and how often op-latency names an op when nothing changed, with exact (Clopper-Pearson) intervals.

Each run is a real `compare` (`--threads 1 --device cpu`) of this venv's torch against itself wrapped by the tests'
harness (tests/harness), which makes one aten op's CPU kernel run N times a call (`gelu-slower`, TUC_OP_SLOWER=N;
outputs exact); the A/A compares the torch with itself. Parts:

- aa: op-latency of every built-in workload, the same torch on both sides: runs naming any op (false alarms);
- ops: `mlp[float32]/op-latency` with gelu N times a call: runs naming aten.gelu (and nothing else);
- attribution: `mlp[float32]/latency` with gelu N times a call: runs whose latency check fails or is undecided and
  whose attribution's top op is aten::gelu (and its share, rounds and seconds).

    .venv/bin/python benchmarks/op_detector.py --runs 10 --attribution-runs 5   # about 12 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "src"))
from harness import interpreter  # noqa: E402

from torch_upgrade_check.analysis.stats import exact_binomial_interval  # noqa: E402


def compare(baseline: str, candidate: str, out: Path, *only: str, extra: tuple[str, ...] = ()) -> dict[str, dict]:
    args = [sys.executable, "-m", "torch_upgrade_check", "compare", "--baseline-python", baseline,
            "--candidate-python", candidate, "--device", "cpu", "--threads", "1", "--out", str(out), "--no-job-summary",
            *extra, *(x for o in only for x in ("--only", o))]
    subprocess.run(args, check=False, capture_output=True, timeout=900)
    reports = json.loads((out / "report.json").read_text())["reports"]
    return {r["id"]: r for r in reports[1]["results"]}


def rate(k: int, n: int) -> str:
    low, high = exact_binomial_interval(k, n)
    return f"{k} of {n} (95% CI {low:.0%}–{high:.0%})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--attribution-runs", type=int, default=5)
    parser.add_argument("--factors", default="2,4", help="gelu's calls a call (TUC_OP_SLOWER), comma list")
    parser.add_argument("--parts", default="aa,ops,attribution")
    args = parser.parse_args()
    python, parts = sys.executable, args.parts.split(",")
    work = Path(tempfile.mkdtemp(prefix="op-detector-"))
    lines = []
    if "aa" in parts:
        named, checks = 0, 0
        for i in range(args.runs):
            results = compare(python, python, work / f"aa{i}", "op-latency")
            judged = [r for r in results.values() if r["outcome"] in ("passed", "suspicious")]
            checks += len(judged)
            named += sum(1 for r in judged if r["outcome"] == "suspicious")
            for r in judged:
                if r["outcome"] == "suspicious":
                    print("A/A named:", r["id"], r["reason"][:200], flush=True)
        lines.append(f"| A/A, op-latency of the built-ins (12 checks, 8 judged: FlexAttention's ops are not recorded) | "
                     f"checks naming an op: {rate(named, checks)} |")
    for factor in (int(f) for f in args.factors.split(",")):
        slow = str(interpreter(python, work / f"py{factor}", breaks=["gelu-slower"],
                               options={"TUC_OP_SLOWER": str(factor)}))
        if "ops" in parts:
            hits, ratios = 0, []
            for i in range(args.runs):
                r = compare(python, slow, work / f"ops{factor}-{i}", "mlp[float32]/op-latency")["mlp[float32]/op-latency"]
                hits += r["metrics"].get("slower_ops") == ["aten.gelu.default float32[32, 128]"]
                ratios += [o["ratio"] for o in r["metrics"].get("ops", []) if o["op"] == "aten.gelu.default"]
            lines.append(f"| gelu {factor}× a call, `mlp[float32]/op-latency` | aten.gelu named alone: {rate(hits, args.runs)}; "
                         f"its ratio p50 {statistics.median(ratios):.2f}× |")
        if "attribution" in parts:
            hits, shares, seconds, changed = 0, [], [], 0
            for i in range(args.attribution_runs):
                r = compare(python, slow, work / f"attr{factor}-{i}", "mlp[float32]/latency",
                            extra=("--ab-budget", "5"))["mlp[float32]/latency"]
                table = r["metrics"].get("op_attribution")
                changed += table is not None
                if table and table["ops"] and table["ops"][0]["op"] == "aten::gelu":
                    hits += 1
                    shares.append(table["ops"][0]["share"] or 0.0)
                if table:
                    seconds.append(table["seconds"])
                print(f"attribution {factor}x run {i}: {r['outcome']} {r['reason'][:220]}", flush=True)
            lines.append(f"| gelu {factor}× a call, `mlp[float32]/latency` (`--ab-budget 5`) | attributed "
                         f"{changed} of {args.attribution_runs}; aten::gelu on top: {rate(hits, args.attribution_runs)}; "
                         f"its share p50 {statistics.median(shares) if shares else float('nan'):.0%}; attribution "
                         f"p50 {statistics.median(seconds) if seconds else float('nan'):.0f} s |")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
