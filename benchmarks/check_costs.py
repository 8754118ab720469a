"""What a check of each aspect costs on this machine: the figures `--list` prints (each aspect's Cost in
src/torch_upgrade_check/aspects.py, read by report/costs.py) and docs/benchmarks.md's table.

Runs `run --device cpu` of the built-in suite, then of a small project whose one workload (a small MLP) takes the
opt-in aspects (compile-time, compile-cache, compiled-latency, aoti, onnx with dynamo=True, export with dynamic
shapes) and two shipped files (a checkpoint and a .pt2 program), and prints each aspect's median and largest check time (`duration_s` in
report.json: the check in its worker, not the worker's start), as a Markdown table and as (median, largest) by aspect,
for aspects.TABLE's Cost figures.

    .venv/bin/python benchmarks/check_costs.py --out /tmp/check-costs        # about 5 minutes on 2 cores
    .venv/bin/python benchmarks/check_costs.py --reports A/report.json B/report.json   # from earlier runs
    .venv/bin/python benchmarks/check_costs.py --parts opt-in --reports A/report.json  # one part again, one kept
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

PROJECT = '''import torch
from torch import nn


def inputs():
    return (torch.randn(4, 16),)


def build():
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 8))
    return {"model": model, "inputs": inputs(), "dynamic_shapes": ({0: torch.export.Dim("batch", min=2, max=64)},),
            "dynamic_inputs": (torch.randn(9, 16),)}


if __name__ == "__main__":
    model = build()["model"].eval()
    torch.save(model.state_dict(), "weights.pt")
    torch.export.save(torch.export.export(model, inputs()), "program.pt2")
'''
CONFIG = """version: 1
suite: none
python-path: [.]
workloads:
  - {name: head, factory: 'head:build', aspects: [numerics, compile-time, compile-cache, compiled-latency, export, aoti],
     onnx: dynamo}
artifacts:
  - {name: weights, file: weights.pt, factory: 'head:build'}
  - {name: program, file: program.pt2, inputs: 'head:inputs'}
"""


def run(python: str, out: Path, cwd: Path | None = None, *extra: str) -> Path:
    subprocess.run([python, "-m", "torch_upgrade_check", "run", "--python", python, "--device", "cpu", "--out", str(out),
                    "--no-job-summary", *extra], cwd=cwd, check=False)
    return out / "report.json"


def costs(reports: list[Path]) -> dict[str, list[float]]:
    by_aspect: dict[str, list[float]] = {}
    for report in reports:
        for r in json.loads(report.read_text())["results"]:
            if r.get("outcome") in ("passed", "failed", "suspicious") and r.get("duration_s") is not None:
                by_aspect.setdefault(r["aspect"], []).append(float(r["duration_s"]))
    return by_aspect


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("/tmp/check-costs"))
    parser.add_argument("--python", default=sys.executable, help="the interpreter with torch (default: this one)")
    parser.add_argument("--reports", type=Path, nargs="*", default=[],
                        help="aggregate these report.json files too (alone: instead of running)")
    parser.add_argument("--parts", default="builtin,opt-in", help="what to run: builtin, opt-in or both (default)")
    args = parser.parse_args(argv)
    reports, parts = list(args.reports), set(args.parts.split(",")) if not args.reports or "--parts" in argv else set()
    if "builtin" in parts:
        reports.append(run(args.python, args.out / "builtin"))
    if "opt-in" in parts:
        project = args.out / "project"
        project.mkdir(parents=True, exist_ok=True)
        (project / "head.py").write_text(PROJECT)
        (project / "torch-upgrade-check.yml").write_text(CONFIG)
        subprocess.run([args.python, "head.py"], cwd=project, check=True)
        reports.append(run(args.python, args.out / "opt-in", project))
    print("| aspect | checks | median s | largest s |\n| --- | --- | --- | --- |")
    table = {}
    for aspect, seconds in sorted(costs(reports).items()):
        median, most = statistics.median(seconds), max(seconds)
        table[aspect] = (round(median, 2), round(most, 1))
        print(f"| `{aspect}` | {len(seconds)} | {median:.2f} | {most:.1f} |")
    print(json.dumps(table))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
