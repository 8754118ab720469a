"""How good is compare's change detector on this machine? False alarms, detection rates, wall time.

  python benchmarks/detector.py [--python PY] [--aa-runs 20] [--slowdown-runs 3] [--wall-runs 3]
                                [--parts aa,slowdown,drift,wall,sizes,bimodal,compile,compiled] [--out benchmarks/results]
                                [--sizes small,medium,large] [--effects 0,0.05,...] [--size-runs 10]
                                [--size-aa-runs 60] [--compile-runs 10] [--compiled-runs 10] [--compiled-aa-runs 60]
                                [--append]

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
- Sizes (part `sizes`): a user workload of three Linear+GELU layers at three sizes (SIZES: about 2, 20 and
  100 ms a forward on one thread of a 2-core machine), `aspects: [latency]`, compared with the defaults
  (--threads 1, --ab-budget 20 s) under injected slowdowns both sides wrap: --size-aa-runs A/A runs
  (effect 0) and --size-runs runs of every other effect in --effects. Per size and effect: the measured
  ratio, fails (a `regression`, or `undecided` beyond the threshold: what `compare` fails by default),
  `undecided`, `improved`, and the check's measuring and wall time.
- Bimodal A/A (part `bimodal`): the same workloads, both sides wrapped with one process in four 12%
  slower as a whole (inject.py's slow state): --size-aa-runs runs per size.
- Compile time (part `compile`): `flex_attention_causal[float32]/compile-time`, --compile-runs runs of each of
  --compile-cells: Inductor's compile_fx that much slower on the candidate (0: the A/A; both sides wrapped).
  compile_fx is most of a cold compile, not all: the measured ratio is the figure.
- Compiled latency (part `compiled`): the sizes part's user workload at --compiled-size (default small), `aspects:
  [compiled-latency]`, each call of an Inductor-compiled graph that much slower on the candidate (the tests'
  `compiled-slower` breakage, TUC_COMPILED_SLOWER; both sides wrapped, the baseline with 0): --compiled-aa-runs A/A
  runs and --compiled-runs runs of each other cell of --compiled-cells. The compiled graph is most of a compiled call,
  not all (Dynamo's guards and wrappers): the measured ratio is the figure.
Every rate comes with its exact binomial 95% interval (Clopper-Pearson). Writes results.json and results.md
under --out after every comparison (a run cut short keeps what it measured); with --parts, only those
parts are measured again and the others are kept from the results.json there; in the parts sizes,
bimodal, compile and compiled only the cells asked for (size, effect) are replaced, or, with --append, added to (each run
keeps its date and the commit whose rules it measured: a cell can grow to 60 runs over several sittings). --note is
printed with the results (say what else the machine was doing). benchmarks/replay.py resamples the recorded pairs
through the rules in force (thousands of runs a cell).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from inject import injected_python

from torch_upgrade_check.analysis import ab
from torch_upgrade_check.analysis.stats import exact_binomial_interval, normal_quantile, quantile

HERE = Path(__file__).resolve().parent
PARTS = ("aa", "slowdown", "drift", "wall", "sizes", "bimodal", "compile", "compiled")
DEFAULT_PARTS = ("aa", "slowdown", "drift", "wall")  # the long new parts are asked for by name
# width and batch of the user workload: about 2, 20 and 100 ms a forward on one thread of the 2-core machine
SIZES = {"small": (512, 64), "medium": (1024, 256), "large": (2048, 256)}
EFFECTS = (0.0, 0.05, 0.075, 0.10, 0.125, 0.25, 1.0)
COMPILE_CHECK = "flex_attention_causal[float32]/compile-time"
WORKLOADS = """
import torch


def _mlp(width, batch):
    layers = []
    for _ in range(3):
        layers += [torch.nn.Linear(width, width), torch.nn.GELU()]
    return torch.nn.Sequential(*layers), (torch.randn(batch, width),)
""" + "".join(f"\n\ndef {name}():\n    return _mlp({w}, {b})\n" for name, (w, b) in SIZES.items())
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


def compare(baseline: str, candidate: str, out: Path, only: list[str], extra: tuple[str, ...] = ()
            ) -> tuple[list[dict], float]:
    cmd = [sys.executable, "-m", "torch_upgrade_check", "compare", "--baseline-python", baseline,
           "--candidate-python", candidate, "--device", "cpu", "--out", str(out), "--fail-on", "none",
           "--no-job-summary", *extra]
    for o in only:
        cmd += ["--only", o]
    started = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    elapsed = time.monotonic() - started
    if proc.returncode != 0:
        raise SystemExit(f"compare failed ({proc.returncode}): {proc.stderr[-2000:]}")
    results = json.loads((out / "report.json").read_text())["reports"][1]["results"]
    for r in results:
        if r["aspect"] in ("latency", "compiled-latency", "compile-time"):
            r["pair_log_ratios"] = pair_series(out / "logs", r["id"])
    return results, elapsed


def pair_series(logs: Path, check: str) -> list[list[float]]:
    """Each fresh pair's per-round log ratios of one timed check, read back from the workers' event logs (one
    observation a side a round, after the pair's warm-up round): what the process-pair noise is computed from."""
    series = []
    for batch in range(1, 100):
        sides = []
        for side in ("baseline", "candidate"):
            found = sorted(logs.glob(f"ab-{side}-b{batch}-*.events.jsonl"))
            obs = [e for f in found for e in map(json.loads, f.read_text().splitlines())
                   if e.get("event") == "observation" and e.get("id") == check and e.get("status") == "ok"]
            sides.append([quantile(e["metrics"].get("samples_ms") or [math.nan], 0.5) for e in obs[1:]])
        if not sides[0]:
            break
        series.append([round(math.log(c / b), 6) for b, c in zip(*sides) if b > 0 and c > 0])
    return series


def ab_rows(results: list[dict]) -> list[dict]:
    """Each A/B check's verdict and cost; a timed check's per-round log ratios too (one sample a side a round, in
    pair order: `batch_rounds` splits them), from which the noise figures are derived."""
    rows = []
    for r in results:
        if r["aspect"] not in ("latency", "compiled-latency", "memory", "compile-time"):
            continue
        m = r["metrics"]
        rows.append({"id": r["id"], "aspect": r["aspect"], "change": m.get("change", r["outcome"]),
                     "outcome": r["outcome"], "ratio": m.get("ratio"), "batches": m.get("batches"),
                     "seconds": sum(m.get("batch_seconds") or [0.0]), "warm_seconds": sum(m.get("warm_up_seconds") or [0.0])})
        pairs = list(zip(m.get("baseline_samples_ms") or [], m.get("samples_ms") or []))
        if r["aspect"] != "memory" and pairs and all(b > 0 and c > 0 for b, c in pairs):
            rows[-1]["log_ratios"] = [round(math.log(c / b), 6) for b, c in pairs]
        if r.get("pair_log_ratios"):
            rows[-1]["pair_log_ratios"] = r["pair_log_ratios"]
    return rows


def user_config(folder: Path, size: str, aspect: str = "latency") -> Path:
    """A config with one user workload of `size` (SIZES), `aspect` only, and its module beside it."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "bench_workloads.py").write_text(WORKLOADS)
    config = folder / f"{size}-{aspect}.yml"
    config.write_text(f"version: 1\nsuite: none\npython-path: [.]\nthreads: 1\nworkloads:\n"
                      f"  - name: {size}\n    factory: bench_workloads:{size}\n    aspects: [{aspect}]\n")
    return config


def commit() -> str:
    """The checkout's commit (the rules measured), or '' outside a git checkout."""
    proc = subprocess.run(["git", "-C", str(HERE), "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          check=False)
    return proc.stdout.strip() if proc.returncode == 0 else ""


def timed_runs(label: str, runs: int, baseline: str, candidate: str, out: Path, only: list[str],
               extra: tuple[str, ...], done: list[dict], save: Callable[[], None], append: bool = False) -> list[dict]:
    """`runs` comparisons added to `done` (each one's A/B rows, wall time, date and commit), saved after each; the
    runs already in `done` are dropped first unless `append` (runs of the same rules, added to across sittings)."""
    if not append:
        done.clear()
    first = len(done)
    for i in range(runs):
        rows, secs = compare(baseline, candidate, out / f"{first + i}", only, extra)
        done.append({"rows": ab_rows(rows), "seconds": secs, "date": time.strftime("%Y-%m-%d"), "commit": commit()})
        save()
        states = [f"{r['change']}/{r['outcome']}" for r in done[-1]["rows"]]
        print(f"{label} run {i + 1}/{runs} ({len(done)} in the cell): {states} in {secs:.0f}s", flush=True)
    return done


def measure_sizes(args: argparse.Namespace, parts: list[str], results: dict, env_a: str, env_b: str, tmp: Path,
                  save: Callable[[], None]) -> None:
    """Parts sizes, bimodal, compile and compiled (see the module docstring); results go into `results` cell by cell."""
    sizes = [s for s in args.sizes.split(",") if s]
    effects = [float(e) for e in args.effects.split(",") if e]
    base = injected_python(env_a, tmp / "wrapped-a", slowdown=0.0)
    for size in sizes:
        extra = ("--config", str(user_config(tmp / "user", size)))
        for effect in effects if "sizes" in parts else ():
            slow = injected_python(env_b, tmp / f"user-slow{effect}", slowdown=effect)
            runs = args.size_aa_runs if effect == 0 else args.size_runs
            cell = results["sizes"].setdefault(size, {}).setdefault(f"{effect:.3f}", [])
            timed_runs(f"{size} +{effect:.1%}", runs, str(base), str(slow), tmp / f"{size}-{effect}", [], extra,
                       cell, save, args.append)
        if "bimodal" in parts:
            a, b = (injected_python(env, tmp / f"bimodal-{n}", slow_state=0.25) for n, env in (("a", env_a), ("b", env_b)))
            timed_runs(f"{size} bimodal A/A", args.size_aa_runs, str(a), str(b), tmp / f"bimodal-{size}", [], extra,
                       results["bimodal"].setdefault(size, []), save, args.append)
    sys.path.insert(0, str(HERE.parent / "tests"))
    from harness import interpreter

    if "compiled" in parts:  # the tests' own breakage: each compiled graph's call slowed by the cell's fraction
        size = args.compiled_size
        extra = ("--config", str(user_config(tmp / "user", size, "compiled-latency")))
        slowed = {key: str(interpreter(env, tmp / f"compiled-py-{side}{key}", breaks=["compiled-slower"],
                                       options={"TUC_COMPILED_SLOWER": key}))
                  for side, env, key in (("a", env_a, "0"), *(("b", env_b, k) for k in args.compiled_cells.split(",") if k))}
        results["compiled"]["check"] = f"{size}[float32]/compiled-latency"
        for key in (k for k in args.compiled_cells.split(",") if k):
            runs = args.compiled_aa_runs if not float(key) else args.compiled_runs
            timed_runs(f"compiled +{float(key):.0%}", runs, slowed["0"], slowed[key], tmp / f"compiled-{key}", [], extra,
                       results["compiled"].setdefault(f"{float(key):.3f}", []), save, args.append)
    if "compile" in parts:  # the tests' own breakage: Inductor's compile_fx slowed by the cell's fraction; both wrapped

        wrapped_a = str(interpreter(env_a, tmp / "compile-plain-a"))
        extra = ("--compile-time", "--threads", "1")
        results["compile"]["check"] = COMPILE_CHECK
        for key in (k for k in args.compile_cells.split(",") if k):  # as given: the power figure first by default
            breaks = ("compile-slower",) if float(key) else ()
            candidate = str(interpreter(env_b, tmp / f"compile-py-{key}", breaks=breaks,
                                        options={"TUC_COMPILE_SLOWER": key} if breaks else None))
            timed_runs(f"compile_fx +{float(key):.0%}", args.compile_runs, wrapped_a, candidate, tmp / f"compile-{key}",
                       [COMPILE_CHECK], extra, results["compile"].setdefault(f"{float(key):.3f}", []), save, args.append)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=sys.executable, help="interpreter whose torch version is benchmarked")
    parser.add_argument("--aa-runs", type=int, default=20, help="A/A comparisons of the whole suite (default 20)")
    parser.add_argument("--slowdown-runs", type=int, default=3, help="comparisons per injected slowdown (default 3)")
    parser.add_argument("--envs", default=str(Path.home() / ".cache" / "torch-upgrade-check" / "bench-envs"),
                        help="where the two A/A environments are built (reused)")
    parser.add_argument("--wall-runs", type=int, default=3, help="run/compare wall-time pairs, alternated (default 3)")
    parser.add_argument("--parts", default=",".join(DEFAULT_PARTS),
                        help=f"comma-separated parts to measure, of {','.join(PARTS)} (default: {','.join(DEFAULT_PARTS)});"
                             " the others are kept from --out's results.json")
    parser.add_argument("--sizes", default=",".join(SIZES), help=f"user workload sizes for sizes/bimodal, of {','.join(SIZES)}")
    parser.add_argument("--effects", default=",".join(str(e) for e in EFFECTS),
                        help="injected slowdowns for part sizes, as fractions (0 is the A/A)")
    parser.add_argument("--size-runs", type=int, default=10, help="comparisons per size and injected slowdown")
    parser.add_argument("--size-aa-runs", type=int, default=60, help="A/A comparisons per size (plain and bimodal)")
    parser.add_argument("--compile-runs", type=int, default=10, help="compile-time comparisons, A/A and slowed")
    parser.add_argument("--compile-cells", default="0.500,0.000",
                        help="compile part: how much longer Inductor's compile_fx takes in each cell (0.500: +50%%; "
                             "0.000: the A/A), comma-separated, measured in this order")
    parser.add_argument("--compiled-runs", type=int, default=10, help="compiled-latency comparisons of a slowed cell")
    parser.add_argument("--compiled-aa-runs", type=int, default=60, help="compiled-latency A/A comparisons")
    parser.add_argument("--compiled-size", default="small", choices=list(SIZES),
                        help="the user workload whose compiled latency part compiled times (default small)")
    parser.add_argument("--compiled-cells", default="0.250,0.000",
                        help="compiled part: how much longer each compiled graph's call takes in each cell (0.250: "
                             "+25%%; 0.000: the A/A), comma-separated, measured in this order")
    parser.add_argument("--append", action="store_true",
                        help="parts sizes, bimodal, compile, compiled: add the runs to those already in each cell asked for "
                             "(each run keeps its date and commit) instead of replacing them")
    parser.add_argument("--note", default=None, help="a line printed with the results (what else the machine was doing)")
    parser.add_argument("--out", default=str(HERE / "results"), help="folder for results.json and results.md")
    args = parser.parse_args()
    parts = [x for x in args.parts.split(",") if x]
    if not parts or set(parts) - set(PARTS):
        parser.error(f"--parts takes a comma-separated subset of {','.join(PARTS)}")
    if set(args.sizes.split(",")) - set(SIZES):
        parser.error(f"--sizes takes a comma-separated subset of {','.join(SIZES)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="tuc-bench-"))
    env_a, env_b = (provision(args.python, Path(args.envs) / name) for name in ("a", "b"))
    previous = out / "results.json"
    results: dict = json.loads(previous.read_text()) if set(parts) != set(PARTS) and previous.exists() else {}
    results.setdefault("sizes", {})
    results.setdefault("bimodal", {})
    results.setdefault("compile", {})
    results.setdefault("compiled", {})
    # the environments as --envs names them under the home folder (a results file names no machine's own paths)
    results = {"aa": [], "slowdown": {}, "drift": {}, **results,
               "envs": [str(Path(e)).replace(str(Path.home()), "~", 1) for e in (env_a, env_b)]}
    results.setdefault("measured", {}).update({part: time.strftime("%Y-%m-%d") for part in parts})
    if args.note:
        results["note"] = args.note

    def save() -> None:
        """results.json and results.md as they stand (written whole, then renamed: a reader never sees half)."""
        for name, text in (("results.json", json.dumps(results, indent=2)), ("results.md", render(results))):
            part = out / f".{name}.tmp"
            part.write_text(text)
            part.replace(out / name)

    if "aa" in parts:
        results["aa"] = []
    for i in range(args.aa_runs if "aa" in parts else 0):
        rows, secs = compare(env_a, env_b, tmp / f"aa{i}", ["latency", "memory"])
        results["aa"].append({"rows": ab_rows(rows), "seconds": secs})
        save()
        states = [r["change"] for r in results["aa"][-1]["rows"]]
        print(f"A/A {i + 1}/{args.aa_runs}: {({s: states.count(s) for s in set(states)})} in {secs:.0f}s", flush=True)

    base = injected_python(env_a, tmp / "wrapped-a", slowdown=0.0)
    for factor in (0.05, 0.10, 0.25, 0.50) if "slowdown" in parts else ():
        slow = injected_python(env_b, tmp / f"slow{factor}", slowdown=factor)
        runs = results["slowdown"][f"{factor:.2f}"] = []
        for i in range(args.slowdown_runs):
            rows, _ = compare(str(base), str(slow), tmp / f"slow{factor}-{i}", ["latency"])
            runs.append(ab_rows(rows))
            save()
            states = [r["change"] for r in runs[-1]]
            print(f"slowdown {factor:.0%} run {i + 1}: {({s: states.count(s) for s in set(states)})}", flush=True)

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
            save()
            print(f"wall {i + 1}/{args.wall_runs}: run {results['wall']['run_s'][-1]:.0f}s, "
                  f"compare {results['wall']['compare_s'][-1]:.0f}s", flush=True)

    measure_sizes(args, parts, results, env_a, env_b, tmp, save)

    save()
    print(render(results))
    return 0


def rate(k: int, n: int) -> str:
    low, high = exact_binomial_interval(k, n)
    return f"{k} of {n} ({k / n:.1%}; 95% CI {low:.1%}–{high:.1%})" if n else "none measured"


UNSETTLED = ("undecided", "suspicious")  # results measured before `undecided` existed say `suspicious`


def fails_by_default(row: dict) -> bool:
    """What compare fails by default: a regression, or an undecided check beyond its threshold."""
    return row["change"] == "regression" or row.get("outcome") == "failed"


def _tally(runs: list[dict]) -> str:
    """One row's cells: measured ratio, fails, undecided, improved, fresh pairs p50 / max, measuring and wall time
    p50."""
    rows = [r for run in runs for r in run["rows"]]
    n = len(rows)
    fails = sum(fails_by_default(r) for r in rows)
    ratios = [r["ratio"] for r in rows if isinstance(r["ratio"], (int, float))]
    errors = sum(r["outcome"] == "error" for r in rows)  # a check that crashed or timed out: no verdict (exit 3)
    return (f"{quantile(ratios, 0.5):.3f} | {rate(fails, n)}{f'; {errors} error, no verdict' if errors else ''} | "
            f"{sum(r['change'] == 'undecided' for r in rows)} | "
            f"{sum(r['change'] == 'improved' for r in rows)} | "
            f"{quantile([r['batches'] or 0 for r in rows], 0.5):.0f} / {max(r['batches'] or 0 for r in rows)} | "
            f"{quantile([r['seconds'] for r in rows], 0.5):.1f} s / "
            f"{quantile([run['seconds'] for run in runs], 0.5):.0f} s")


def render_sizes(res: dict) -> list[str]:
    """The sizes, bimodal and compile parts: one row per workload and effect."""
    rows = [(size, f"+{float(effect):.1%}" if float(effect) else "A/A", runs)
            for size, by_effect in res.get("sizes", {}).items() for effect, runs in by_effect.items()]
    rows += [(size, "bimodal A/A (1 process in 4 12% slower)", runs) for size, runs in res.get("bimodal", {}).items()]
    comp = res.get("compile") or {}
    rows += [(comp["check"], f"Inductor compile_fx +{float(k):.0%}" if float(k) else "A/A", runs)
             for k, runs in comp.items() if k != "check"]
    compiled = res.get("compiled") or {}
    rows += [(compiled["check"], f"compiled graph calls +{float(k):.0%}" if float(k) else "A/A", runs)
             for k, runs in compiled.items() if k != "check"]
    if not rows:
        return []
    head = ["", "| workload (forward ms: small ≈2, medium ≈20, large ≈100) | injected | measured ratio p50 | fails | "
            "undecided | improved | pairs p50 / max | measuring / wall time p50 |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    return head + [f"| {size} | {effect} | {_tally(runs)} |" for size, effect, runs in rows if runs]


def as_batch(log_ratios: list[float], seconds: float = 0.0, warm_seconds: float = 0.0) -> ab.Batch:
    """A recorded pair (its rounds' log ratios, candidate over baseline) as the Batch ab judges: baseline 1 a round."""
    return ab.Batch((1.0,) * len(log_ratios), tuple(math.exp(x) for x in log_ratios), seconds=seconds,
                    warm_seconds=warm_seconds)


def pair_noise(runs: list[dict]) -> dict | None:
    """Where the A/A noise of one workload lives, from every fresh pair of its runs (read back from the workers'
    logs; a run measured before they were read back counts for nothing here): the round SD within a pair
    (ab.round_sd, pooled), the SD of the pair estimates (ab.Batch.estimate: what benchmarks/noise.py calls the
    pair SD), the part of it that round noise cannot explain (the per-pair offset that ab.PAIR_SD is the prior
    of), and an approximate 95% upper bound on the pair SD (chi-square, Wilson-Hilferty). None below 3 pairs."""
    series = [d for run in runs for r in run["rows"] for d in r.get("pair_log_ratios") or []]
    batches = [as_batch(d) for d in series if len(d) >= 2]
    if len(batches) < 3:
        return None
    within, _ = ab.round_sd(batches)
    estimates = [b.estimate() for b in batches]
    between = statistics.stdev(estimates)
    rounds = statistics.mean(len(b.baseline) for b in batches)
    offset = math.sqrt(max(0.0, between**2 - within**2 / rounds))
    df = len(batches) - 1
    chi2_low = df * (1 - 2 / (9 * df) - normal_quantile(0.975) * math.sqrt(2 / (9 * df))) ** 3
    return {"pairs": len(batches), "rounds_mean": rounds, "round_sd": within, "pair_sd": between,
            "pair_offset_sd": offset, "pair_sd_upper95": between * math.sqrt(df / chi2_low) if chi2_low > 0 else math.inf}


def render_noise(res: dict) -> list[str]:
    """The A/A runs' noise figures, per workload, beside the priors the statistics assume."""
    cells = [(size, "A/A", by_effect.get("0.000", [])) for size, by_effect in res.get("sizes", {}).items()]
    cells += [(size, "bimodal A/A", runs) for size, runs in res.get("bimodal", {}).items()]
    for part in ("compile", "compiled"):
        comp = res.get(part) or {}
        cells += [(comp["check"], "A/A", comp["0.000"])] if comp.get("0.000") else []
    rows = [(size, kind, n) for size, kind, runs in cells if (n := pair_noise(runs))]
    if not rows:
        return []
    worth = f"{ab.UNCHANGED_PRIOR_DF:g} pair{'' if ab.UNCHANGED_PRIOR_DF == 1 else 's'}"
    return ["", f"Noise of the A/A runs, over their fresh pairs (prior assumed by analysis/ab.py: pair offset "
                f"SD {ab.UNCHANGED_PAIR_SD:.0%}, worth {worth}, to rule a change out; to fail one {ab.PAIR_SD:.0%} in "
                f"one to three pairs, {ab.FAIL_PAIR_SD:.0%} from the {ab.MIN_PAIRS}th pair on, worth "
                f"{ab.FAIL_PRIOR_DF}; a failure needs {ab.MIN_PAIRS} pairs):",
            "",
            "| workload | kind | fresh pairs | rounds a pair (mean) | round SD | pair SD (95% upper bound) | per-pair offset SD |",
            "| --- | --- | --- | --- | --- | --- | --- |"] + [
        f"| {size} | {kind} | {n['pairs']} | {n['rounds_mean']:.1f} | {n['round_sd']:.1%} | {n['pair_sd']:.1%} "
        f"({n['pair_sd_upper95']:.1%}) | {n['pair_offset_sd']:.1%} |" for size, kind, n in rows]


def render(res: dict) -> str:
    aa_rows = [r for run in res["aa"] for r in run["rows"]]
    runs = len(res["aa"])
    lines = ["| measurement | result |", "| --- | --- |"]
    if runs:
        failing_runs = sum(any(fails_by_default(r) for r in run["rows"]) for run in res["aa"])
        improved_runs = sum(any(r["change"] == "improved" for r in run["rows"]) for run in res["aa"])
        warned_runs = sum(any(r["change"] in UNSETTLED for r in run["rows"]) for run in res["aa"])
        lines += [
            f"| A/A runs with a failing verdict (whole latency + memory suite) | {rate(failing_runs, runs)} |",
            f"| A/A runs with an `improved` | {rate(improved_runs, runs)} |",
            f"| A/A runs with an `undecided` (`suspicious` before it) | {rate(warned_runs, runs)} |",
            f"| A/A checks failing / improved / undecided | "
            f"{sum(fails_by_default(r) for r in aa_rows)} / {sum(r['change'] == 'improved' for r in aa_rows)} / "
            f"{sum(r['change'] in UNSETTLED for r in aa_rows)} of {len(aa_rows)} |",
        ]
    for factor, factor_runs in res["slowdown"].items():
        rows = [r for run in factor_runs for r in run if r["aspect"] == "latency"]
        hit = sum(fails_by_default(r) for r in rows)
        warned = sum(r["change"] in UNSETTLED for r in rows)
        ratios = sorted(r["ratio"] for r in rows if isinstance(r["ratio"], (int, float)))
        lines.append(f"| injected slowdown {float(factor):.0%}: latency checks failed | {rate(hit, len(rows))}; "
                     f"{warned} undecided; median measured ratio {quantile(ratios, 0.5):.3f} |")
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
    lines += render_sizes(res)
    lines += render_noise(res)
    if res.get("note"):
        lines += ["", res["note"]]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
