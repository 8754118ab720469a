"""Settings back into a command line, the one place that does it: repro commands, compare's head, bisect's steps (no torch).

Every flag is repeated as the user typed it (settings keep the text), so a command works wherever the original did.
action_entry.build_argv is the other way in: the action's inputs to a command line.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from torch_upgrade_check import suite
from torch_upgrade_check.aspects import AB_ASPECTS, ASPECT, LATENCY_LIKE, TABLE, ab_of, part
from torch_upgrade_check.commands.common import PROG
from torch_upgrade_check.commands.settings import BisectSettings, CompareSettings, Install, RunSettings
from torch_upgrade_check.model import CheckSpec
from torch_upgrade_check.orchestrate.builds import Build

# compare's flags that bisect hands on to every step as given: with a value, repeatable, and switches
FORWARD_ONE = ("device", "timeout", "rtol", "atol", "config", "threads", "python", "torch_backend", "installer",
               "venv_dir", "venv_cap", "max_latency_regression", "max_memory_regression",
               "max_compile_time_regression", "ab_budget", "undecided")
FORWARD_MANY = ("max_latency_ms", "workload", "python_path", "extra_index_url", "find_links", "extra_requirement",
                "requirements", "extras")
FORWARD_FLAGS = tuple(sorted(a.switch for a in TABLE if a.switch))  # the rows' switches, in their names' order
# compare's flags that bisect does not hand on through those lists (it sets them per step, or refuses them), and
# why; tests/test_bisect.py holds all four to compare's parser, so a new compare flag is forwarded or named here
NOT_FORWARDED = {
    "baseline": "each step's good build", "baseline_python": "each step's good build",
    "candidate": "the build judged", "candidate_python": "the build judged",
    "base_ref": "not a bisect flag: both sides of a step share the working tree's stack",
    "head_ref": "not a bisect flag: both sides of a step share the working tree's stack",
    "out": "each step writes under OUT/steps/", "no_job_summary": "a step never writes the job summary",
    "fail_on": "always forwarded: it decides bad", "only": "each step runs the checks still to settle",
    "index_url": "forwarded, or the nightly channel's index", "fleet": "refused by bisect",
    "list": "refused by bisect", "help": "argparse's",
    "scan": "not a bisect flag: the api check names the file:line; the step that dropped a name is not sought",
    "fail_on_shared_failures": "not a bisect flag: a step's good build passes the checks bisected, so no failure is "
                               "shared (the config's key still applies)",
    "no_attribution": "every step passes it: a step needs its verdict, not where a slower forward's time went",
}
# an A/B aspect's --max-<threshold>-regression, by the threshold its row names
REGRESSION_FLAG = {a: f"max_{ab_of(a).threshold.value.replace('-', '_')}_regression" for a in AB_ASPECTS}


def option(dest: str) -> str:
    """A flag's option string from its argparse dest: max_latency_ms -> --max-latency-ms."""
    return "--" + dest.replace("_", "-")


def repeated(dest: str, items: Iterable[str]) -> list[str]:
    """A repeatable flag, once per item."""
    return [x for item in items for x in (option(dest), item)]


def repro_command(s: RunSettings, head: Sequence[str], device: str, spec: CheckSpec) -> str:
    """A command that runs this one check again: `head` (the subcommand and the torch it runs), then the
    device, the check and every flag that shaped it, as the user typed them."""
    cmd = [PROG, *head, "--device", device, "--only", suite.rerun_pattern(spec.workload, spec.dtype, spec.aspect)]
    cmd += repeated("workload", (item for item in s.workload if item.partition("=")[0] == spec.workload))
    cmd += repeated("python_path", s.python_path)
    cmd += ["--config", s.config] if s.config else []
    for name, typed in (("rtol", s.rtol), ("atol", s.atol), ("threads", s.threads), ("timeout", s.timeout)):
        cmd += [option(name), str(typed)] if typed is not None else []
    if spec.aspect in LATENCY_LIKE:
        cmd += repeated("max_latency_ms", s.max_latency_ms)
    cmd += own_flags(s, spec.aspect)
    regression = REGRESSION_FLAG.get(spec.aspect)
    typed = vars(s)[regression] if regression and isinstance(s, Install) else None  # compare only
    if regression and typed is not None:
        cmd += [option(regression), typed]
    return shlex.join(cmd)


def own_flags(s: RunSettings, aspect: str) -> list[str]:
    """The flags an aspect's judge.py says shaped its check: its row's switch where on (REPRO_SWITCH), and --fail-on
    as typed where that names its kind (REPRO_FAIL_ON)."""
    judge, row = part(aspect, "judge"), ASPECT.get(aspect)
    if row is None:  # an aspect of another version's report
        return []
    switch = [option(row.switch)] if getattr(judge, "REPRO_SWITCH", False) and vars(s)[row.switch] else []
    fail_on = ["--fail-on", s.fail_on] if getattr(judge, "REPRO_FAIL_ON", False) and row.kind.value in s.fail_on_set else []
    return switch + fail_on


def run_head(python: str) -> list[str]:
    """`run` with the interpreter it tested."""
    return ["run", "--python", python]


def compare_head(s: CompareSettings) -> list[str]:
    """`compare` with both torches as the user gave them: SPECs with the flags that built their venvs, or
    prepared interpreters. Paths are kept as typed, so the command works wherever the original did."""
    head = ["compare"]
    for role, prepared, spec in (("baseline", s.baseline_python, s.baseline), ("candidate", s.candidate_python, s.candidate)):
        head += [f"--{role}-python", prepared] if prepared else [f"--{role}", spec] if spec else []
    if not (s.baseline or s.candidate):
        return head  # no venv is built: the install flags changed nothing
    if s.python != sys.executable:  # builds the venvs, and is the torch of SPEC 'current'
        head += ["--python", s.python]
    for name, typed, default in (("torch_backend", s.torch_backend, "auto"), ("installer", s.installer, "auto"),
                                 ("index_url", s.index_url, ""), ("venv_dir", s.venv_dir, None)):
        head += [option(name), typed] if typed != default else []
    for name in ("extra_index_url", "find_links", "extra_requirement", "requirements", "extras"):
        head += repeated(name, vars(s)[name])
    return head


def compare_repro(s: CompareSettings, device: str, spec: CheckSpec) -> str:
    """The `compare` command that runs this one check again, with both torches (a cross-version check needs both)."""
    return repro_command(s, compare_head(s), device, spec)


def fleet_flags(s: RunSettings, only: str = "environment") -> list[str]:
    """The flags that run environment[-]/fleet again (the fleet as given, and nothing else); with `only` another
    --only pattern (the checks fleet-memory judges: commands.common.fleet_memory asks)."""
    return ["--only", only, *(["--config", s.config] if s.config else []), *(["--fleet", s.fleet] if s.fleet else [])]



def _side(role: str, build: Build) -> list[str]:
    return [f"--{role}-python", build.python] if build.python else [f"--{role}", build.label]


def bisect_step(s: BisectSettings, good: Build, build: Build, folder: Path, index_url: str,
                only: Sequence[str]) -> list[str]:
    """The `compare` that judges `build` against the `good` one on the checks `only` names, every forwarded flag
    as given."""
    argv = ["compare", *_side("baseline", good), *_side("candidate", build), "--out", str(folder),
            "--no-job-summary", "--no-attribution", "--fail-on", s.fail_on]
    argv += repeated("only", only)
    if s.index_url or index_url:
        argv += ["--index-url", s.index_url or index_url]
    given = vars(s)
    for name in FORWARD_ONE:
        if given[name] not in (None, ""):
            argv += [option(name), str(given[name])]
    for name in FORWARD_MANY:
        argv += repeated(name, given[name])
    return argv + [option(name) for name in FORWARD_FLAGS if given[name]]
