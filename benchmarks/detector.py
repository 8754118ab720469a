"""How good is compare's change detector on this machine? False alarms, detection rates, wall time.

  python benchmarks/detector.py [--python PY] [--aa-runs 20] [--slowdown-runs 3] [--wall-runs 3]
                                [--parts aa,slowdown,drift,wall] [--out benchmarks/results]

- A/A: the same torch version in two separately provisioned environments (venvs built here, under
  --envs), compared with the tool's defaults over every built-in latency and memory check,
  --aa-runs times. A failing verdict, an `improved` and a `suspicious` are each counted as what they
  are: false alarms (the first two) and warnings.
- Injected slowdowns of 5%, 10%, 25% and 50%: both sides wrapped by inject.py, the baseline with
  factor 0, so the wrapper's own cost is on both sides; the share of latency checks that fail. The
  measured ratio is reported beside the injected one.
- Injected numeric drift (nn.Linear outputs x (1 + 1e-3)): the share of cross-version checks of
  Linear-using workloads that fail, and of the others (which must not).
- Wall time: `run` of the whole built-in suite and an A/A `compare` of it, with defaults, alternated
  --wall-runs times (one machine's speed drifts by a third between minutes); the medians are compared.
Every rate comes with its binomial 95% interval (Wilson). Writes results.json and results.md under --out;
with --parts, only those parts are measured again and the others are kept from the results.json there.
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

from torch_upgrade_check.analysis.stats import binomial_interval, quantile

HERE = Path(__file__).resolve().parent
PARTS = ("aa", "slowdown", "drift", "wall")
LINEAR = ("mlp", "cnn", "transformer_block")


def provision(python: str, folder: Path) -> str:
    """A venv at `folder` with the same torch version as `python`'s, installed by pip (reused when it works)."""
    venv_python = folder / "bin" / "python"
    if venv_python.exists() and subprocess.run([str(venv_python), "-c", "import torch"], capture_output=True,
                                               check=False).returncode == 0:
        return str(venv_python)
    version = subprocess.run([python, "-c", "import torch; print(torch.__version__.split('+')[0])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    subprocess.run([str(venv_python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    f"torch=={version}"], check=True)
    return str(venv_python)


def compare(baseline: str, candidate: str, out: Path, only: list[str]) -> tuple[list[dict], float]:
    cmd = [sys.executable, "-m", "torch_upgrade_check", "compare", "--baseline-python", baseline,
           "--candidate-python", candidate, "--device", "cpu", "--out", str(out), "--fail-on", "none",
           "--no-job-summary"]
    for o in only:
        cmd += ["--only", o]
    started = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    elapsed = time.monotonic() - started
    if proc.returncode != 0:
        raise SystemExit(f"compare failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return json.loads((out / "report.json").read_text())["reports"][1]["results"], elapsed


def ab_rows(results: list[dict]) -> list[dict]:
    return [{"id": r["id"], "aspect": r["aspect"], "change": r["metrics"].get("change", r["outcome"]),
             "outcome": r["outcome"], "ratio": r["metrics"].get("ratio"), "batches": r["metrics"].get("batches"),
             "seconds": sum(r["metrics"].get("batch_seconds") or [0.0])}
            for r in results if r["aspect"] in ("latency", "memory")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=sys.executable, help="interpreter whose torch version is benchmarked")
    parser.add_argument("--aa-runs", type=int, default=20, help="A/A comparisons of the whole suite (default 20)")
    parser.add_argument("--slowdown-runs", type=int, default=3, help="comparisons per injected slowdown (default 3)")
    parser.add_argument("--envs", default=str(Path.home() / ".cache" / "torch-upgrade-check" / "bench-envs"),
                        help="where the two A/A environments are built (reused)")
    parser.add_argument("--wall-runs", type=int, default=3, help="run/compare wall-time pairs, alternated (default 3)")
    parser.add_argument("--parts", default=",".join(PARTS),
                        help=f"comma-separated parts to measure (default all: {','.join(PARTS)}); the others are "
                             "kept from --out's results.json")
    parser.add_argument("--out", default=str(HERE / "results"), help="folder for results.json and results.md")
    args = parser.parse_args()
    parts = [x for x in args.parts.split(",") if x]
    if not parts or set(parts) - set(PARTS):
        parser.error(f"--parts takes a comma-separated subset of {','.join(PARTS)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="tuc-bench-"))
    env_a, env_b = (provision(args.python, Path(args.envs) / name) for name in ("a", "b"))
    previous = out / "results.json"
    results: dict = json.loads(previous.read_text()) if set(parts) != set(PARTS) and previous.exists() else {}
    results = {"aa": [], "slowdown": {}, "drift": {}, **results, "envs": [env_a, env_b]}
    results.setdefault("measured", {}).update({part: time.strftime("%Y-%m-%d") for part in parts})
    if "aa" in parts:
        results["aa"] = []
    for i in range(args.aa_runs if "aa" in parts else 0):
        rows, secs = compare(env_a, env_b, tmp / f"aa{i}", ["latency", "memory"])
        results["aa"].append({"rows": ab_rows(rows), "seconds": secs})
        states = [r["change"] for r in results["aa"][-1]["rows"]]
        print(f"A/A {i + 1}/{args.aa_runs}: {({s: states.count(s) for s in set(states)})} in {secs:.0f}s", flush=True)

    base = injected_python(env_a, tmp / "wrapped-a", slowdown=0.0)
    for factor in (0.05, 0.10, 0.25, 0.50) if "slowdown" in parts else ():
        slow = injected_python(env_b, tmp / f"slow{factor}", slowdown=factor)
        runs = []
        for i in range(args.slowdown_runs):
            rows, _ = compare(str(base), str(slow), tmp / f"slow{factor}-{i}", ["latency"])
            runs.append(ab_rows(rows))
            states = [r["change"] for r in runs[-1]]
            print(f"slowdown {factor:.0%} run {i + 1}: {({s: states.count(s) for s in set(states)})}", flush=True)
        results["slowdown"][f"{factor:.2f}"] = runs

    if "drift" in parts:
        drift = injected_python(env_b, tmp / "drift", drift=1e-3)
        rows, _ = compare(env_a, str(drift), tmp / "drift-out", ["numerics"])
        cv = [r for r in rows if r["aspect"] == "cross-version"]
        results["drift"] = {"linear": [r["outcome"] for r in cv if r["workload"] in LINEAR],
                            "other": [r["outcome"] for r in cv if r["workload"] not in LINEAR]}
        print(f"drift: {results['drift']}", flush=True)

    if "wall" in parts:
        for old in ("wall_run_s", "wall_compare_s"):  # the single pair that earlier versions measured
            results.pop(old, None)
        results["wall"] = {"run_s": [], "compare_s": []}
        for i in range(args.wall_runs):
            started = time.monotonic()
            proc = subprocess.run([sys.executable, "-m", "torch_upgrade_check", "run", "--python", env_a, "--device",
                                   "cpu", "--out", str(tmp / f"wall-run{i}"), "--no-job-summary", "--fail-on", "none"],
                                  capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                raise SystemExit(f"run failed ({proc.returncode}): {proc.stderr[-2000:]}")
            results["wall"]["run_s"].append(time.monotonic() - started)
            results["wall"]["compare_s"].append(compare(env_a, env_b, tmp / f"wall-compare{i}", [])[1])
            print(f"wall {i + 1}/{args.wall_runs}: run {results['wall']['run_s'][-1]:.0f}s, "
                  f"compare {results['wall']['compare_s'][-1]:.0f}s", flush=True)

    (out / "results.json").write_text(json.dumps(results, indent=2))
    md = render(results)
    (out / "results.md").write_text(md)
    print(md)
    return 0


def _rate(k: int, n: int) -> str:
    low, high = binomial_interval(k, n)
    return f"{k} of {n} ({k / n:.1%}; 95% CI {low:.1%}–{high:.1%})" if n else "none measured"


def render(res: dict) -> str:
    aa_rows = [r for run in res["aa"] for r in run["rows"]]
    runs = len(res["aa"])
    lines = ["| measurement | result |", "| --- | --- |"]
    if runs:
        failing_runs = sum(any(r["change"] == "regression" for r in run["rows"]) for run in res["aa"])
        improved_runs = sum(any(r["change"] == "improved" for r in run["rows"]) for run in res["aa"])
        warned_runs = sum(any(r["change"] == "suspicious" for r in run["rows"]) for run in res["aa"])
        lines += [
            f"| A/A runs with a failing verdict (whole latency + memory suite) | {_rate(failing_runs, runs)} |",
            f"| A/A runs with an `improved` | {_rate(improved_runs, runs)} |",
            f"| A/A runs with a `suspicious` | {_rate(warned_runs, runs)} |",
            f"| A/A checks failing / improved / suspicious | "
            f"{sum(r['change'] == 'regression' for r in aa_rows)} / {sum(r['change'] == 'improved' for r in aa_rows)} / "
            f"{sum(r['change'] == 'suspicious' for r in aa_rows)} of {len(aa_rows)} |",
        ]
    for factor, factor_runs in res["slowdown"].items():
        rows = [r for run in factor_runs for r in run if r["aspect"] == "latency"]
        hit = sum(r["change"] == "regression" for r in rows)
        warned = sum(r["change"] == "suspicious" for r in rows)
        ratios = sorted(r["ratio"] for r in rows if isinstance(r["ratio"], (int, float)))
        lines.append(f"| injected slowdown {float(factor):.0%}: latency checks failed | {_rate(hit, len(rows))}; "
                     f"{warned} suspicious; median measured ratio {quantile(ratios, 0.5):.3f} |")
    d = res["drift"]
    if d:
        lines.append(f"| injected drift (Linear ×(1+1e-3)): cross-version failures | Linear-using: "
                     f"{d['linear'].count('failed')} of {len(d['linear'])}; others: {d['other'].count('failed')} of "
                     f"{len(d['other'])} |")
    if runs:
        seconds = [r["seconds"] for r in aa_rows if r["aspect"] == "latency"]
        batches = [r["batches"] or 0 for r in aa_rows if r["aspect"] == "latency"]
        lines.append(f"| A/A latency check: measuring time p50 / p95; fresh pairs used p50 / max | "
                     f"{quantile(seconds, 0.5):.1f} s / {quantile(seconds, 0.95):.1f} s; {quantile(batches, 0.5):.0f} / "
                     f"{max(batches, default=0)} |")
        lines.append(f"| A/A latency + memory compare, wall time p50 | "
                     f"{quantile([r['seconds'] for r in res['aa']], 0.5):.0f} s |")
    wall = res.get("wall")
    if wall and wall["run_s"]:
        run_s, compare_s = quantile(wall["run_s"], 0.5), quantile(wall["compare_s"], 0.5)
        each = sorted(c / r for r, c in zip(wall["run_s"], wall["compare_s"]))
        lines.append(f"| whole built-in suite: `run` / A/A `compare` wall time, median of {len(wall['run_s'])} "
                     f"alternated | {run_s:.0f} s / {compare_s:.0f} s ({compare_s / run_s:.2f}×; each pair "
                     f"{each[0]:.2f}×–{each[-1]:.2f}×) |")
    if res.get("measured"):
        lines.append("| measured on | " + ", ".join(f"{k} {v}" for k, v in res["measured"].items()) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
