"""The api check's host side on a real tree (transformers + timm): the ast scan, and TorchFix before and after
lint.py's prefilter and parallel processes, with each variant's findings compared (the prefilter must lose none).

The tree is the packages' own sources, unpacked from their wheels (never committed):

    pip download --no-deps transformers==5.23.0 timm==1.0.31 -d wheels
    mkdir tree && for w in wheels/*.whl; do python -m zipfile -e "$w" tree; done
    .venv/bin/python benchmarks/api_scan.py tree --json api-scan.json     # the single process over every file is the longest

With `--compare BASELINE_PY CANDIDATE_PY` it runs the check as a team does instead, the tool's real command
(`compare --baseline-python ... --candidate-python ... --only api --scan TREE`), and writes its wall time, TorchFix's
own (timed apart, as the check runs it) and every finding of the api result (tests/test_real_repositories.py runs the
same with venvs the tool installs):

    .venv/bin/python benchmarks/api_scan.py tree --compare OLD/bin/python NEW/bin/python --json api-compare.json

Each variant is one wall-clock run (`time.monotonic`) with the CPU its processes used (`os.times` of children);
the variants run one after another, each cut at --before-limit seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from torch_upgrade_check.aspects.api import host as apiscan
from torch_upgrade_check.aspects.api import host_lint as lint


def _timed_torchfix(files: list[str], jobs: int, limit: float) -> dict[str, object]:
    before = os.times()
    started = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, "-m", "torchfix", "-j", str(jobs), *files], capture_output=True,
                              text=True, timeout=limit, check=False)
        found, finished = lint.parse_torchfix(proc.stdout), True
    except subprocess.TimeoutExpired:
        found, finished = [], False
    after = os.times()
    return {"files": len(files), "jobs": jobs, "wall_s": round(time.monotonic() - started, 1), "finished": finished,
            "cpu_s": round(after.children_user + after.children_system - before.children_user
                           - before.children_system, 1),
            "findings": sorted(f"{a.code} {a.where}" for a in found)}


def _compare(tree: str, baseline: str, candidate: str, out: Path) -> dict[str, object]:
    """The check as a team runs it: the real CLI, one wall-clock run, then the api result's findings."""
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "torch_upgrade_check", "compare", "--baseline-python", baseline,
                           "--candidate-python", candidate, "--only", "api", "--scan", tree, "--device", "cpu",
                           "--no-job-summary", "--out", str(out)], capture_output=True, text=True, check=False)
    wall = round(time.monotonic() - started, 1)
    reports = json.loads((out / "report.json").read_text())["reports"]
    api = {r["id"]: r for r in reports[-1]["results"]}["stack[-]/api"]
    keys = ("gone", "gone_guarded", "warned", "narrowed", "missing_on_both", "torchfix")
    return {"exit": proc.returncode, "wall_s": wall, "outcome": api["outcome"], "reason": api["reason"],
            "names": len(api["metrics"].get("uses", {})), **{k: api["metrics"].get(k) for k in keys}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tree", help="the unpacked sources to scan")
    parser.add_argument("--json", help="write the figures here too")
    parser.add_argument("--before-limit", type=float, default=300.0, help="cut the single-process run here (s)")
    parser.add_argument("--compare", nargs=2, metavar=("BASELINE_PY", "CANDIDATE_PY"),
                        help="run the tool's compare --only api between these interpreters instead")
    args = parser.parse_args(argv)
    figures: dict[str, object] = {"cpus": os.cpu_count()}
    if args.compare:
        started = time.monotonic()
        advice, said = apiscan.torchfix([args.tree], timeout_s=3600)
        figures["torchfix_as_the_check_runs_it"] = {"wall_s": round(time.monotonic() - started, 1), "note": said,
                                                     "findings": sorted(f"{a.code} {a.where}" for a in advice)}
        figures["compare"] = _compare(args.tree, *args.compare, Path(args.json or "api-compare.json").parent / "out")
        print(json.dumps(figures, indent=1))
        if args.json:
            Path(args.json).write_text(json.dumps(figures, indent=1))
        return 0

    def note(key: str, value: object) -> None:
        figures[key] = value
        print(key, json.dumps(value)[:400], flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps(figures, indent=1))

    started, cpu = time.monotonic(), time.process_time()
    scanned = apiscan.scan([args.tree])
    note("scan", {"wall_s": round(time.monotonic() - started, 1), "cpu_s": round(time.process_time() - cpu, 1),
                  "names": len(scanned.uses), "guarded_names": len(scanned.guards),
                  "every_use_guarded": sum(1 for n in scanned.uses if apiscan.guarded_only(scanned, n))})
    files = apiscan.python_files([args.tree])
    started = time.monotonic()
    kept = [str(p) for p in lint.worth_linting(files, lint.rule_names())]
    note("prefilter", {"files": len(files), "kept": len(kept), "wall_s": round(time.monotonic() - started, 1)})
    every = [str(p) for p in files]
    jobs = min(os.cpu_count() or 1, lint.MAX_JOBS)
    started = time.monotonic()
    advice, said = apiscan.torchfix([args.tree])
    note("after_as_the_check_runs_it", {"wall_s": round(time.monotonic() - started, 1), "note": said,
                                        "findings": sorted(f"{a.code} {a.where}" for a in advice)})
    note("all_files_parallel", _timed_torchfix(every, jobs, args.before_limit))
    reference = set(figures["all_files_parallel"]["findings"])  # type: ignore[index]
    note("prefilter_lost", sorted(reference - set(figures["after_as_the_check_runs_it"]["findings"])))  # type: ignore[index]
    note("before_all_files_one_process", _timed_torchfix(every, 1, args.before_limit))
    note("prefiltered_one_process", _timed_torchfix(kept, 1, args.before_limit))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
