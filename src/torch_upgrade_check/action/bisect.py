"""Input `bisect`: after a failed compare, the first bad build on the checks that failed, run as a child CLI;
its outputs are `bisect-*` (no torch)."""

from __future__ import annotations

import shlex
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from torch_upgrade_check import github
from torch_upgrade_check.action.argv import bisect_argv
from torch_upgrade_check.action.inputs import PROG, fail_on
from torch_upgrade_check.model import Outcome
from torch_upgrade_check.schema import SchemaError, read_bisection, read_reports
from torch_upgrade_check.suite import rerun_pattern

# The outputs the action adds to the CLI's when input `bisect` ran a bisection.
BISECT_OUTPUTS = ("bisect-outcome", "bisect-first-bad", "bisect-last-good", "bisect-compare-url", "bisect-report")


def bisect_after_failure(values: Mapping[str, str], cwd: Path, environ: Mapping[str, str]) -> dict[str, str]:
    """Input `bisect`: after a failed compare, the first bad build between the good one and the candidate, on
    the checks that failed. Its summary follows the compare's; its outputs are `bisect-*` (the step's
    `verdict` stays the compare's: the bisection explains a failure, it does not change it). Returns them."""
    report_dir = cwd / values["report-dir"]
    try:
        doc = read_reports(report_dir / "report.json")
    except (OSError, SchemaError) as e:
        return _bisect_outputs(environ, "error", f"no compare report to bisect from: {e}")
    candidate = next((r for r in doc if r.role == "candidate"), None)
    kinds = fail_on(values)  # the failures that failed the step: a latency failure under fail-on correctness did not
    failed = sorted({rerun_pattern(r.workload, r.dtype, r.aspect) for r in candidate.results
                     if r.outcome is Outcome.FAILED and r.fail_kind in kinds}) if candidate else []
    if candidate is None or not failed:
        return _bisect_outputs(environ, "error", "the compare failed no check that a bisection could follow")
    argv = bisect_argv(values, candidate.label.split("+")[0], failed)
    print(f"{PROG}: bisecting the failed checks: {shlex.join([PROG, *argv])}", flush=True)
    child = github.relayed_environ(environ)  # its outputs are relayed as bisect-*
    try:
        rc = subprocess.run([sys.executable, "-m", "torch_upgrade_check", *argv], cwd=cwd, env=child,
                            check=False).returncode
    except OSError as e:
        return _bisect_outputs(environ, "error", f"could not start the bisection: {e}")
    path = report_dir / "bisect" / "report.json"
    try:
        record = read_bisection(path)
    except (OSError, SchemaError):
        return _bisect_outputs(environ, "error", f"the bisection ended with exit code {rc} and wrote no report; "
                                                 "the step's log says why")
    why = "" if record.outcome in ("found", "range") else (record.reason or f"exit code {rc}")
    return _bisect_outputs(environ, record.outcome, why, first_bad=record.first_bad, last_good=record.last_good,
                           compare_url=record.compare_url, report=str(path.resolve()))


def _bisect_outputs(environ: Mapping[str, str], outcome: str, why: str, **found: str) -> dict[str, str]:
    outputs = {name: "" for name in BISECT_OUTPUTS}  # every one, empty when unknown
    outputs.update({"bisect-outcome": outcome, **{f"bisect-{k.replace('_', '-')}": v for k, v in found.items()}})
    if why:
        print(f"{PROG}: bisect: {outcome}: {why}", file=sys.stderr, flush=True)
        github.warning(f"{PROG}: bisect", f"{outcome}: {why}", environ=environ)
    github.set_outputs(outputs, environ=environ)
    return outputs
