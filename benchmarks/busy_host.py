"""A/A comparisons on a busy host: does compare cry wolf when another process shares its CPUs?

  python benchmarks/busy_host.py [--python PY] [--runs 2] [--conditions quiet,hog,compare,shared]
                                 [--size small] [--out benchmarks/results] [--note TEXT]

Each run is an A/A `compare` of detector.py's user workload of `--size` (latency only, one thread, the defaults
otherwise) between two venvs of the same torch, under one condition:
- quiet: nothing else started (whatever else the machine runs is said with --note, and its load average is kept);
- hog: on every CPU this process may use, a process pinned to it that spins 50 ms and sleeps 50 ms (a 50%-duty
  co-tenant on whichever CPU compare pins its workers to);
- compare: a second A/A compare of the same workload, started at the same moment and restarted until the measured
  one ends (two runners' jobs on one machine); the co-tenant's own verdicts are counted too;
- shared: the same, both compares confined (taskset-like, through this process's affinity) to the last CPU: the
  CPU choice before this benchmark's rule (every compare pinned to the last CPUs), so the two share it.
Per condition: false alarms (what compare fails by default, and `improved`), `undecided` with the host busy, the
pairs set aside, and the same pairs judged by the rule before busy pairs were set aside (analysis.ab.decide over
every pair, replayed on the recorded pairs), so one sitting gives both figures; the old CPU choice is what `shared`
measures. The default (2 runs of each, the small workload) takes about 5-10 minutes on 2 cores. Writes
busy-host.json and busy-host.md under --out.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from detector import ab_rows, as_batch, commit, compare, pair_series, provision, rate, user_config

from torch_upgrade_check.analysis import ab
from torch_upgrade_check.orchestrate.measure import usable_cpus

CONDITIONS = ("quiet", "hog", "compare", "shared")
HOG = ("import os, sys, time\nos.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True:\n"
       "    end = time.perf_counter() + 0.05\n    while time.perf_counter() < end: pass\n    time.sleep(0.05)\n")


def co_tenants(condition: str, baseline: str, candidate: str, only: list[str], extra: tuple[str, ...],
               tmp: Path) -> list[subprocess.Popen[bytes]]:
    if condition == "hog":
        return [subprocess.Popen([sys.executable, "-c", HOG, str(cpu)]) for cpu in usable_cpus()]
    if condition in ("compare", "shared"):
        loop = ("import subprocess, sys\nwhile True:\n    subprocess.run(sys.argv[1:], check=False)\n")
        cmd = [sys.executable, "-m", "torch_upgrade_check", "compare", "--baseline-python", baseline,
               "--candidate-python", candidate, "--device", "cpu", "--out", str(tmp / "co-tenant"), "--fail-on", "none",
               "--no-job-summary", *extra, *[x for o in only for x in ("--only", o)]]
        return [subprocess.Popen([sys.executable, "-c", loop, *cmd], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL, start_new_session=True)]
    return []


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        try:
            os.killpg(p.pid, 9) if p.pid == os.getpgid(p.pid) else p.kill()
        except OSError:
            pass
        p.wait()


def load() -> float:
    """The machine's 1-minute load average (what else ran, beside the condition's own co-tenant)."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return float("nan")


def old_rule(row: dict, threshold: float = 0.10) -> str:
    """The state ab.decide gives every recorded pair of the row, busy or not: the rule before this benchmark's."""
    pairs = [as_batch(r) for r in row.get("pair_log_ratios") or [] if r]
    if not pairs:
        return "none"
    d = ab.decide(pairs, threshold, alpha=ab.run_alpha(1), final=True)
    return "regression" if d.state == "regression" or (d.state == "undecided" and d.beyond) else str(d.state)


def rows_of(results: list[dict]) -> list[dict]:
    """detector.ab_rows of finished A/B results, each with its reason, the pairs set aside and the old rule's state."""
    by_id = {r["id"]: r for r in results}
    rows = [row for row in ab_rows(results) if row["outcome"] not in ("not-run", "error")]
    for row in rows:
        r = by_id[row["id"]]
        row.update(old_rule=old_rule(row), reason=r.get("reason", ""),
                   host_busy_pairs=r["metrics"].get("host_busy_pairs", 0),
                   host_busy_shares=r["metrics"].get("host_busy_shares"))
    return rows


def co_tenant_rows(folder: Path) -> list[dict]:
    """The co-tenant compare's last finished run (its report is rewritten as it goes: unfinished checks are left out)."""
    try:
        results = json.loads((folder / "report.json").read_text())["reports"][1]["results"]
    except (OSError, ValueError, KeyError, IndexError):
        return []
    for r in results:
        r["pair_log_ratios"] = pair_series(folder / "logs", r["id"])
    return rows_of(results)


def render(res: dict) -> str:
    lines = [f"# Busy host: A/A compares with a co-tenant ({res.get('date', '')}, commit {res.get('commit', '')})", "",
             res.get("note", ""), "",
             "| condition | checks | fail by default | improved | undecided (host busy) | pairs set aside | "
             "the old rule on the same pairs: fail / improved | load average |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for cond, rows in res["conditions"].items():
        n = len(rows)
        if not n:
            continue
        fails = sum(r["outcome"] == "failed" for r in rows)
        improved = sum(r["change"] == "improved" for r in rows)
        host = sum("host busy" in (r.get("reason") or "") for r in rows)
        aside = sum(r.get("host_busy_pairs") or 0 for r in rows)
        pairs = sum(r.get("batches") or 0 for r in rows)
        old = [r.get("old_rule", "none") for r in rows]
        loads = [x for r in rows for x in (r.get("load_before"), r.get("load_after")) if isinstance(x, float)]
        span = f"{min(loads):.1f}–{max(loads):.1f}" if loads else "?"
        lines.append(f"| {cond} | {n} | {rate(fails, n)} | {improved} | {host} | {aside} of {pairs} | "
                     f"{rate(old.count('regression'), n)} / {old.count('improved')} | {span} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", default=sys.executable, help="a Python with torch: its version is compared A/A")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--conditions", default=",".join(CONDITIONS))
    parser.add_argument("--size", default="small", help="detector.py's user workload size")
    parser.add_argument("--envs", type=Path, default=Path.home() / ".cache" / "torch-upgrade-check" / "bench-envs")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    parser.add_argument("--note", default="", help="what else the machine was doing")
    args = parser.parse_args()
    conditions = [c for c in args.conditions.split(",") if c]
    if not conditions or set(conditions) - set(CONDITIONS):
        parser.error(f"--conditions takes a comma-separated subset of {','.join(CONDITIONS)}")
    env_a, env_b = (provision(args.python, args.envs / name) for name in ("a", "b"))
    tmp = Path(tempfile.mkdtemp(prefix="tuc-busy-host-"))
    extra = ("--config", str(user_config(tmp / "user", args.size)))
    only = [f"{args.size}[float32]/latency"]
    res = {"date": time.strftime("%Y-%m-%d"), "commit": commit(), "note": args.note, "size": args.size,
           "conditions": {c: [] for c in conditions}}
    args.out.mkdir(parents=True, exist_ok=True)
    for cond in conditions:
        for i in range(args.runs):
            run_dir = tmp / f"{cond}-{i}"
            mine = os.sched_getaffinity(0)
            if cond == "shared":  # both compares inherit it: each pins to the one CPU it may use
                os.sched_setaffinity(0, {max(mine)})
            try:
                procs = co_tenants(cond, env_a, env_b, only, extra, run_dir)
                started = load()
                try:
                    results, secs = compare(env_a, env_b, run_dir / "out", only, extra)
                finally:
                    stop(procs)
            finally:
                os.sched_setaffinity(0, mine)
            rows = rows_of(results) + (co_tenant_rows(run_dir / "co-tenant") if cond in ("compare", "shared") else [])
            for row in rows:
                row.update(load_before=started, load_after=load())
            res["conditions"][cond] += rows
            print(f"{cond} run {i + 1}/{args.runs}: {[(r['change'], r['outcome'], r['host_busy_pairs']) for r in rows]} "
                  f"in {secs:.0f}s", flush=True)
            (args.out / "busy-host.json").write_text(json.dumps(res, indent=1))
            (args.out / "busy-host.md").write_text(render(res))
    print(render(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
