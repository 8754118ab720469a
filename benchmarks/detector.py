"""How good is compare's change detector on this machine? False alarms and detection rates.

  python benchmarks/detector.py [--python PY] [--repeats 5] [--out benchmarks/results]

- A/A: the same torch on both sides, latency and memory of the whole built-in suite, `--repeats`
  times: every `regression` is a false alarm (`suspicious` is counted too; it warns, never fails).
- Injected slowdowns of 5%, 10%, 25% and 50% (a candidate interpreter whose sitecustomize slows
  every top-level module call by that factor): the share of latency checks flagged as regressions.
- Injected numeric drift (nn.Linear outputs scaled by 1 + 1e-3): the share of cross-version checks
  of Linear-using workloads that fail.
- Wall time of `run` and of an A/A `compare` of the whole built-in suite (with --wall).
Writes results.json and results.md under --out and prints the Markdown table for the README.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from inject import injected_python

HERE = Path(__file__).resolve().parent


def compare(python_a: str, python_b: str, out: Path, only: list[str], threads: int) -> tuple[list[dict], float]:
    cmd = [sys.executable, "-m", "torch_upgrade_check", "compare", "--baseline-python", python_a,
           "--candidate-python", python_b, "--device", "cpu", "--threads", str(threads), "--out", str(out),
           "--fail-on", "none", "--no-job-summary"]
    for o in only:
        cmd += ["--only", o]
    started = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    elapsed = time.monotonic() - started
    if proc.returncode != 0:
        raise SystemExit(f"compare failed ({proc.returncode}): {proc.stderr[-2000:]}")
    doc = json.loads((out / "report.json").read_text())
    return doc["reports"][1]["results"], elapsed


def count(results: list[dict], aspect: str) -> dict[str, int]:
    rows = [r for r in results if r["aspect"] == aspect]
    out = {"checks": len(rows)}
    for r in rows:
        key = r["metrics"].get("change") or r["outcome"]
        out[key] = out.get(key, 0) + 1
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=sys.executable, help="interpreter with torch (both sides)")
    parser.add_argument("--repeats", type=int, default=5, help="A/A comparisons (default 5)")
    parser.add_argument("--slowdown-repeats", type=int, default=2, help="comparisons per injected slowdown")
    parser.add_argument("--threads", type=int, default=1, help="torch threads in the workers (default 1)")
    parser.add_argument("--wall", action="store_true", help="also time run vs compare of the whole suite")
    parser.add_argument("--out", default=str(HERE / "results"), help="folder for results.json and results.md")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="tuc-bench-"))
    results: dict = {"python": args.python, "threads": args.threads, "aa": [], "slowdown": {}, "drift": {}}

    for i in range(args.repeats):
        rows, secs = compare(args.python, args.python, tmp / f"aa{i}", ["latency", "memory"], args.threads)
        entry = {"latency": count(rows, "latency"), "memory": count(rows, "memory"), "seconds": secs}
        results["aa"].append(entry)
        print(f"A/A {i + 1}/{args.repeats}: {entry}", flush=True)

    for factor in (0.05, 0.10, 0.25, 0.50):
        slow = injected_python(args.python, tmp / f"slow{factor}", slowdown=factor)
        runs = []
        for i in range(args.slowdown_repeats):
            rows, _ = compare(args.python, str(slow), tmp / f"slow{factor}-{i}", ["latency"], args.threads)
            ratios = sorted(r["metrics"].get("ratio", 0) for r in rows if r["aspect"] == "latency")
            runs.append({**count(rows, "latency"), "median_ratio": ratios[len(ratios) // 2] if ratios else None})
            print(f"slowdown {factor:.0%} run {i + 1}: {runs[-1]}", flush=True)
        results["slowdown"][f"{factor:.2f}"] = runs

    drift = injected_python(args.python, tmp / "drift", drift=1e-3)
    rows, _ = compare(args.python, str(drift), tmp / "drift-out", ["numerics"], args.threads)
    cv = [r for r in rows if r["aspect"] == "cross-version"]
    linear = [r for r in cv if r["workload"] in ("mlp", "cnn", "transformer_block")]
    results["drift"] = {"cross_version_checks": len(cv), "linear_workloads": len(linear),
                        "failed_linear": sum(r["outcome"] == "failed" for r in linear),
                        "failed_other": sum(r["outcome"] == "failed" for r in cv if r not in linear)}
    print(f"drift: {results['drift']}", flush=True)

    if args.wall:
        started = time.monotonic()
        subprocess.run([sys.executable, "-m", "torch_upgrade_check", "run", "--python", args.python, "--device",
                        "cpu", "--out", str(tmp / "wall-run"), "--no-job-summary"], capture_output=True, check=False)
        results["wall_run_s"] = time.monotonic() - started
        _, results["wall_compare_s"] = compare(args.python, args.python, tmp / "wall-compare", [], args.threads)
        print(f"wall: run {results['wall_run_s']:.0f}s, compare {results['wall_compare_s']:.0f}s", flush=True)

    (out / "results.json").write_text(json.dumps(results, indent=2))
    md = render(results)
    (out / "results.md").write_text(md)
    print(md)
    return 0


def render(res: dict) -> str:
    aa_lat = sum(e["latency"]["checks"] for e in res["aa"])
    aa_mem = sum(e["memory"]["checks"] for e in res["aa"])
    false_lat = sum(e["latency"].get("regression", 0) for e in res["aa"])
    false_mem = sum(e["memory"].get("regression", 0) for e in res["aa"])
    susp = sum(e["latency"].get("suspicious", 0) + e["memory"].get("suspicious", 0) for e in res["aa"])
    lines = [
        "| measurement | result |",
        "| --- | --- |",
        f"| A/A false alarms (failing verdicts), latency | {false_lat} of {aa_lat} checks in {len(res['aa'])} runs |",
        f"| A/A false alarms (failing verdicts), memory | {false_mem} of {aa_mem} checks |",
        f"| A/A `suspicious` warnings | {susp} of {aa_lat + aa_mem} checks |",
    ]
    for factor, runs in res["slowdown"].items():
        checks = sum(r["checks"] for r in runs)
        hit = sum(r.get("regression", 0) for r in runs)
        warn = sum(r.get("suspicious", 0) for r in runs)
        med = [r["median_ratio"] for r in runs if r.get("median_ratio")]
        lines.append(f"| injected slowdown {float(factor):.0%}: flagged as regression | {hit} of {checks} "
                     f"({hit / checks:.0%}); {warn} more suspicious; median measured ratio "
                     f"{sum(med) / len(med):.2f} |" if checks else f"| slowdown {factor} | no checks |")
    d = res["drift"]
    lines.append(f"| injected drift (Linear ×(1+1e-3)): cross-version failures | {d['failed_linear']} of "
                 f"{d['linear_workloads']} Linear-using workloads; {d['failed_other']} of the "
                 f"{d['cross_version_checks'] - d['linear_workloads']} others (which use no Linear) |")
    if "wall_run_s" in res:
        lines.append(f"| wall time, whole built-in suite: `run` / A/A `compare` | {res['wall_run_s']:.0f} s / "
                     f"{res['wall_compare_s']:.0f} s |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
