"""Command line: `run`, `compare`, `bisect`, `report`, `init`, `merge`, `history`; main(argv) -> int is the one error
boundary (no torch).

It builds the parser, parses, builds the command's settings once (commands/settings.py) and hands them to the
command's module in commands/.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Sequence
from typing import NoReturn

from torch_upgrade_check import __version__
from torch_upgrade_check.commands import bisect, compare, history, init, merge, report, run, settings
from torch_upgrade_check.commands.common import PROG
from torch_upgrade_check.commands.settings import DEFAULT_TIMEOUT_S
from torch_upgrade_check.errors import EXIT_INFRA, EXIT_USAGE, UsageError
from torch_upgrade_check.history import publish
from torch_upgrade_check.model import DEVICES
from torch_upgrade_check.orchestrate.budget import CAP_S
from torch_upgrade_check.orchestrate.workers import InfrastructureError
from torch_upgrade_check.schema import SchemaError

DEFAULT_OUT = "torch-upgrade-check-report"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")


def _add_run_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default="auto", choices=("auto", *DEVICES),
                   help="auto = cuda, else mps, else cpu (default: auto)")
    p.add_argument("--only", action="append", default=[], metavar="GLOB",
                   help="run only checks whose id, workload or aspect matches (repeatable)")
    p.add_argument("--out", default=DEFAULT_OUT, metavar="DIR", help=f"output folder (default: {DEFAULT_OUT})")
    # --timeout, --rtol, --atol and --threads stay text here: values.py parses them in commands/settings.py, so
    # a bad one is reported with every other problem, in the words the action and the config file use.
    p.add_argument("--timeout", default=None, metavar="SECONDS",
                   help=f"per-check timeout, for every check (default: each check's sized from its workload's "
                        f"forward, {DEFAULT_TIMEOUT_S:g} to {CAP_S:g})")
    p.add_argument("--rtol", default=None, metavar="X",
                   help="relative tolerance, 0 or more (default: per dtype; 0 with --atol 0: bitwise equality)")
    p.add_argument("--atol", default=None, metavar="Y", help="absolute tolerance, 0 or more (default: per dtype)")
    p.add_argument("--max-latency-ms", action="append", default=[], metavar="NAME=MS",
                   help="fail when the median latency of workload NAME (or checks matching a glob) exceeds MS")
    p.add_argument("--workload", action="append", default=[], metavar="NAME=MODULE:FUNCTION",
                   help="add your own workload: a factory returning (model, inputs) (repeatable)")
    p.add_argument("--python-path", action="append", default=[], metavar="DIR",
                   help="folder prepended to the worker's sys.path, to import --workload factories from")
    p.add_argument("--config", default=None, metavar="PATH",
                   help="config file (default: torch-upgrade-check.yml in the current folder, when present)")
    p.add_argument("--threads", default=None, metavar="N", help="torch CPU threads in the worker (default: torch's)")
    p.add_argument("--fail-on", default="correctness,latency,memory", metavar="LIST",
                   help="what fails the command: a comma list of correctness, latency, memory, warnings (new "
                        "in the candidate; otherwise they warn), or none (report only) "
                        "(default: correctness,latency,memory)")
    p.add_argument("--compile-time", action="store_true",
                   help="also time cold compiles (a fresh Inductor cache each) of every workload compile checks; in "
                        "compare, A/B like latency (slow: each sample is a whole compile)")
    p.add_argument("--ddp", action="store_true",
                   help="also run the built-in transformer_block's ddp check: DistributedDataParallel steps on 2 "
                        "ranks (CPU; on CUDA one a GPU, up to 8) under torchrun against the unsharded model, each "
                        "rank's exit and the process group's shutdown checked (slow: a torchrun and two torch imports)")
    p.add_argument("--fleet", default=None, metavar="SPEC",
                   help="the GPUs the torch under test must serve, like 'sm_80,sm_90,driver=535.104.05,memory=24GiB' "
                        "(replaces the config's fleet:); judged from the wheel itself as environment[-]/fleet, and "
                        "each workload's peak memory on CUDA against the smallest card as environment[-]/fleet-memory")
    p.add_argument("--no-job-summary", action="store_true", help="do not append to $GITHUB_STEP_SUMMARY")
    p.add_argument("--list", action="store_true", help="list the checks that would run, and exit")


def _add_scan_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scan", action="append", default=[], metavar="PATH",
                   help="a folder or .py file of your code whose torch names the api check asks of each side's torch "
                        "(repeatable; with --only api and no --scan, the python-path folders)")


def _add_install_args(p: argparse.ArgumentParser) -> None:
    """compare's and bisect's: where torch comes from, and the A/B thresholds."""
    p.add_argument("--python", default=sys.executable,
                     help="interpreter for SPEC 'current' and to build venvs from (default: this one)")
    p.add_argument("--torch-backend", default="auto", metavar="BACKEND",
                     help="auto, pypi, cpu, cu126, cu128, ..., rocmX.Y (default: auto)")
    p.add_argument("--installer", default="auto", choices=("auto", "uv", "pip"),
                     help="auto = uv when on PATH or beside this tool, else pip (default: auto)")
    p.add_argument("--index-url", default="", metavar="URL", help="index for torch, replacing the backend's")
    p.add_argument("--extra-index-url", action="append", default=[], metavar="URL", help="extra index (repeatable)")
    p.add_argument("--find-links", action="append", default=[], metavar="PATH", help="wheel folder (repeatable)")
    p.add_argument("--extra-requirement", action="append", default=[], metavar="REQ",
                     help="another package for both venvs, e.g. numpy (repeatable)")
    p.add_argument("--requirements", action="append", default=[], metavar="FILE",
                     help="the team's stack for both venvs, each side's torch pinned: a requirements*.txt, "
                          "pyproject.toml, uv.lock, poetry.lock, pdm.lock, pylock.toml or Pipfile.lock (repeatable; "
                          "adds to the config's 'requirements:')")
    p.add_argument("--extras", action="append", default=[], metavar="LIST",
                     help="pyproject.toml optional-dependencies or dependency-groups to install too (comma list)")
    p.add_argument("--venv-dir", default=None, metavar="DIR",
                     help="where venvs live (default: $XDG_CACHE_HOME or ~/.cache, /torch-upgrade-check/venvs)")
    p.add_argument("--venv-cap", default=None, metavar="GB",
                     help="size cap of the venv store: least recently used venvs not in use are deleted above it "
                          "(default: 20)")
    p.add_argument("--max-latency-regression", default=None, metavar="PCT",
                     help="slowdown that fails when significant: 10%% or 0.10 (default: the config's, else 10%%)")
    p.add_argument("--ab-budget", default=None, metavar="SECONDS",
                     help="measuring time per latency/memory check, warm-ups included, before an unsettled one is "
                          "undecided; a latency check with a slow forward gets at least what 32 of its rounds and 4 "
                          "warm-ups cost, up to 10 times it (a compiled-latency check likewise, its compiles apart); "
                          "a compile-time check gets what 20 of its rounds cost, between 10 and 30 times it, warm-up "
                          "compiles apart (default: the config's ab-budget, else 20)")
    p.add_argument("--undecided", default=None, choices=("fail", "pass"),
                     help="an A/B check undecided within its budget whose estimate is beyond the threshold (and "
                          "significant at the run's confidence): fail it "
                          "(as its --fail-on kind) or let it pass with a warning (default: the config's, else fail)")
    p.add_argument("--max-memory-regression", default=None, metavar="PCT",
                     help="peak-memory growth that fails (default: the config's, else 20%%)")
    p.add_argument("--max-compile-time-regression", default=None, metavar="PCT",
                     help="cold compile slowdown that fails when significant, with --compile-time (default: the "
                          "config's, else 25%%)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Tell whether upgrading PyTorch is safe for your workloads.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    run = sub.add_parser("run", help="run the validation suite with one torch on one device")
    run.add_argument("--python", default=sys.executable, help="interpreter whose torch is tested (default: this one)")
    _add_scan_arg(run)
    _add_run_args(run)

    cmp = sub.add_parser("compare", help="run the suite under a baseline and a candidate torch and say what changed")
    cmp.add_argument("--candidate", metavar="SPEC",
                     help="candidate torch: a version (2.13.0), a range ('>=2.13,<2.14'), nightly, test, latest (the "
                          "newest release on the index), current, or auto "
                          "(the torch pin of the --requirements files, at --head-ref)")
    cmp.add_argument("--baseline", metavar="SPEC",
                     help="baseline torch, same forms; auto reads it at --base-ref (default: none: candidate only)")
    cmp.add_argument("--base-ref", metavar="REF",
                     help="the git commit whose stack files (--requirements, the config's requirements:) are the "
                          "baseline's: its stack, and with --baseline auto its torch pin (default: the working tree's)")
    cmp.add_argument("--head-ref", metavar="REF",
                     help="the git commit whose stack files are the candidate's: its stack, and with --candidate auto "
                          "its torch pin (default: the working tree)")
    cmp.add_argument("--candidate-python", metavar="PATH", help="a prepared interpreter for the candidate, instead of SPEC")
    cmp.add_argument("--baseline-python", metavar="PATH", help="a prepared interpreter for the baseline, instead of SPEC")
    cmp.add_argument("--no-attribution", action="store_true",
                     help="do not profile both sides' forward op by op after a latency check ends regression or "
                          "undecided (where the time went: about 4 fresh process pairs, up to 60 s a check)")
    cmp.add_argument("--fail-on-shared-failures", action=argparse.BooleanOptionalAction, default=None,
                     help="fail on a correctness failure the baseline shares at the same size too (by default it is "
                          "the model's own: a warning; default: the config's fail-on-shared-failures, else no)")
    _add_scan_arg(cmp)
    _add_install_args(cmp)
    _add_run_args(cmp)

    bis = sub.add_parser("bisect", help="find the first bad torch build between a good and a bad one")
    bis.add_argument("--good", metavar="VERSION", help="the last version known good (e.g. 2.14.0.dev20261110)")
    bis.add_argument("--bad", metavar="VERSION", help="the first version known bad (e.g. 2.14.0.dev20261120)")
    bis.add_argument("--builds", metavar="FILE",
                     help="the builds in order, oldest (good) first, one a line: a version, or a path to a prepared "
                          "interpreter (LABEL=PATH), instead of listing them from the index")
    _add_install_args(bis)
    _add_run_args(bis)

    rep = sub.add_parser("report", help="re-render junit.xml and summary.md from a report.json")
    rep.add_argument("report", help="path of report.json")
    rep.add_argument("--junit", default=None, metavar="PATH", help="where to write JUnit XML")
    rep.add_argument("--summary", default=None, metavar="PATH", help="where to write the Markdown summary")

    init = sub.add_parser("init", help="write a starter config and a caller workflow into a repository")
    init.add_argument("--dir", default=".", metavar="DIR", help="repository root (default: .)")
    init.add_argument("--canary", action="store_true",
                      help="write the canary workflow instead (.github/workflows/torch-canary.yml): nightly checks of "
                           "the next torch with history, trends and a bisection on an alarm (docs/canary.md)")

    merge = sub.add_parser("merge", help="combine reports from several runners into one summary and JUnit file")
    merge.add_argument("reports", nargs="*", help="report.json files")
    merge.add_argument("--runner-status", action="append", default=[], metavar="FILE",
                       help="a runner-status.json of the reusable workflow's check job (repeatable): a job that "
                            "left no report becomes an error run, with the reason")
    merge.add_argument("--runners", default=None, metavar="JSON",
                       help="the runner label sets the workflow ran on, as a JSON list: a runner that left no "
                            "status at all becomes an error run too")
    merge.add_argument("--fail-on", default="correctness,latency,memory", metavar="LIST",
                       help="what fails the merge (exit 1): as run's and compare's --fail-on, so the merge decides as "
                            "each runner's job did (default: correctness,latency,memory)")
    merge.add_argument("--out", default=DEFAULT_OUT, metavar="DIR", help=f"output folder (default: {DEFAULT_OUT})")
    _add_history(sub)
    return parser


def _add_history(sub: argparse._SubParsersAction) -> None:
    his = sub.add_parser("history", help="read a history store: trends, change points, flaky checks, the alarm")
    his.add_argument("action", nargs="?", choices=("publish",),
                     help="publish: append a record to the store on a branch of this repository and push it")
    his.add_argument("--store", metavar="DIR", help="the history store folder (records.jsonl, compacted/)")
    his.add_argument("--append", metavar="REPORT_JSON", help="append a record built from this report.json first")
    his.add_argument("--commit", metavar="SHA", help="the commit the appended run checked (default: $GITHUB_SHA)")
    his.add_argument("--markdown", metavar="FILE", help="write the summary lines as Markdown (with --charts' pictures)")
    his.add_argument("--charts", metavar="DIR", help="draw a PNG per check that changed (needs the history extra)")
    his.add_argument("--html", metavar="DIR", help="write a static page: a chart per check, the outcome timeline")
    his.add_argument("--json", metavar="FILE", help="write what was found as JSON")
    his.add_argument("--alarm-output", metavar="FILE",
                     help="append the outputs alarm (true|false), last-good, first-bad to this GitHub output file")
    publish.add_arguments(his)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
        given = settings.build(args, argv)
        if args.command == "bisect":
            return bisect.execute(given, argv)
        command = {"run": run, "compare": compare, "report": report, "init": init, "merge": merge,
                   "history": history}[args.command]
        return command.execute(given)
    except (UsageError, SchemaError) as e:
        problems = e.problems if isinstance(e, UsageError) else (str(e),)
        for problem in problems:
            print(f"{PROG}: error: {problem}", file=sys.stderr)
        _stopped_early(problems, "torch-upgrade-check: bad input or config")
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted; finished checks are in the report", file=sys.stderr)
        return 130
    except Exception as e:  # never exit 1 (Python's own code for a crash), which would read as "thresholds crossed"
        kind = "infrastructure error" if isinstance(e, InfrastructureError) else "internal error"
        if kind == "internal error":
            traceback.print_exc()
        problem = f"{kind}: {e}" + ("" if isinstance(e, InfrastructureError) else
                                    f" ({type(e).__name__}); please report it with the traceback above")
        print(f"{PROG}: {problem}", file=sys.stderr)
        _stopped_early([problem], f"torch-upgrade-check: {kind}")
        return EXIT_INFRA


def _stopped_early(problems: Sequence[str], title: str) -> None:
    """On GitHub: an annotation per problem and the outputs verdict=error, counts 0 (github.py writes them)."""
    from torch_upgrade_check import github

    github.stopped_early(problems, environ=os.environ, title=title)
