"""The GitHub Action's last step: action inputs (from env) -> validated -> one CLI command, run, its exit code.

action.yml hands every input to this module through `env:` as INPUT_<NAME> (upper case, `-` -> `_`), so
no input is ever interpolated into shell. Problems are collected and printed one line each, naming the
input and the fix (exit 2), before any torch is installed or checked. The command is then `compare` when a
torch version or a baseline is asked for, else `run` with the torch already installed for `python`.

The CLI gets the real `--fail-on`: it writes report.json, junit.xml, summary.md, the step summary,
annotations and the step's outputs first and only then exits 1, so the step fails last, after
everything was written, and the rule of which failures count lives in one place (the CLI). A bad input
stops here, before the CLI: an `::error` annotation per problem and the outputs `verdict=error`, counts 0
(github.py writes both; this module writes no GitHub file itself). It never imports torch.

`cache-key` (the action's step before it, when input `cache` is true) says whether and under which key the
torch venvs are restored from and saved to GitHub's cache: the outputs `enabled`, `key` and `path`.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from torch_upgrade_check import github
from torch_upgrade_check.analysis.fleet import parse_fleet
from torch_upgrade_check.errors import EXIT_FAILED, EXIT_INFRA, EXIT_USAGE, UsageError
from torch_upgrade_check.model import FAIL_ON, Outcome
from torch_upgrade_check.orchestrate.builds import is_version
from torch_upgrade_check.orchestrate.provision import BACKEND_RE, parse_spec, python_version
from torch_upgrade_check.orchestrate.store import default_venv_dir, store_root, untrusted
from torch_upgrade_check.orchestrate.workers import InfrastructureError
from torch_upgrade_check.schema import SchemaError, read_bisection, read_reports
from torch_upgrade_check.suite import rerun_pattern
from torch_upgrade_check.values import gigabytes, latency_limit, percent, threads, timeout, tolerance, undecided

PROG = "torch-upgrade-check"

# Every input of action.yml, in its order; each reaches this module as env var INPUT_<NAME>.
INPUTS: tuple[str, ...] = (
    "candidate-torch-version", "baseline-torch-version", "torch-backend", "index-url", "extra-index-url", "find-links",
    "extra-requirements", "requirements", "extras", "base-ref", "venv-cap", "cache", "device", "fleet", "config", "checks", "rtol", "atol", "max-latency-regression",
    "max-memory-regression", "compile-time", "ddp", "scan", "max-compile-time-regression", "max-latency-ms", "check-timeout-seconds", "fail-on",
    "ab-budget", "undecided", "fail-on-shared-failures", "threads", "python", "working-directory",
    "job-summary", "report-dir", "upload-report", "bisect", "bisect-good",
)
# The names inputs had before v1.0.0, kept as aliases through v1: each still works, with one warning in the log.
ALIASES: dict[str, str] = {"torch-version": "candidate-torch-version", "suite": "checks",
                           "timeout": "check-timeout-seconds"}
DEFAULTS: dict[str, str] = {
    "torch-backend": "auto", "device": "auto", "fail-on": "correctness,latency,memory", "python": "python3",
    "working-directory": ".", "job-summary": "true", "report-dir": "torch-upgrade-check-report", "cache": "false",
    "bisect": "false", "compile-time": "false", "ddp": "false", "upload-report": "true",
}
# The inputs that decide which torch venvs get built: the cache key hashes them.
CACHE_INPUTS = ("candidate-torch-version", "baseline-torch-version", "torch-backend", "index-url", "extra-index-url",
                "find-links", "extra-requirements", "requirements", "extras")
# The outputs the action adds to the CLI's when input `bisect` ran a bisection.
BISECT_OUTPUTS = ("bisect-outcome", "bisect-first-bad", "bisect-last-good", "bisect-compare-url", "bisect-report")
DEVICES = ("auto", "cpu", "cuda", "mps")
URL_RE = re.compile(r"^(https?|file)://\S+$")
TRUE, FALSE = ("true", "yes", "1", "on"), ("false", "no", "0", "off")
DEFAULT_ARTIFACT = "torch-upgrade-check-report"
ARTIFACT_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")


def env_name(input_name: str) -> str:
    """`max-latency-ms` -> `INPUT_MAX_LATENCY_MS`."""
    return "INPUT_" + input_name.upper().replace("-", "_")


def read_inputs(environ: Mapping[str, str]) -> dict[str, str]:
    """The inputs as strings, stripped, under their current names (an alias's value under the name it stands
    for, when that one is blank); a missing or blank input takes its default."""
    values = {}
    for name in INPUTS:
        value = environ.get(env_name(name), "").strip()
        old = [alias for alias, new in ALIASES.items() if new == name]
        values[name] = value or (environ.get(env_name(old[0]), "").strip() if old else "") or DEFAULTS.get(name, "")
    return values


def alias_notes(environ: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """(warnings, problems) about the deprecated input names: one warning per alias used; a problem when an alias
    and its new name are both set to different values."""
    warnings, problems = [], []
    for old, new in ALIASES.items():
        old_value, new_value = (environ.get(env_name(n), "").strip() for n in (old, new))
        if not old_value:
            continue
        if new_value and new_value != old_value:
            problems.append(f"inputs '{old}' and '{new}' are the same input (the first its old name) and disagree: "
                            f"{old_value!r} against {new_value!r}; keep only '{new}'")
        else:
            warnings.append(f"input '{old}' is deprecated and will be removed in v2: rename it to '{new}' "
                            f"(same values)")
    return warnings, problems


def split_items(text: str, *, commas: bool = True) -> list[str]:
    """Items separated by newlines (and commas, unless they may occur inside an item); `#` starts a comment line."""
    lines = [line.strip() for line in text.splitlines()]
    items = [line for line in lines if line and not line.startswith("#")]
    if commas:
        items = [part.strip() for item in items for part in item.split(",")]
    return [item for item in items if item]


@dataclass(frozen=True)
class Plan:
    """What to run: the argv after `torch-upgrade-check`, where, and what the inputs asked of the failure."""

    argv: tuple[str, ...]
    cwd: Path
    fail_on: tuple[str, ...]
    problems: tuple[str, ...] = field(default=())


def _problem(parse: Callable[[str, str], object], name: str, value: str) -> str:
    """The parser's one-line message for `input 'name'`, or "" when the value parses."""
    try:
        parse(value, f"input '{name}'")
    except UsageError as e:
        return str(e)
    return ""


def validate(values: Mapping[str, str]) -> list[str]:
    """Every problem with the inputs, one sentence each, naming the input, the value and the fix."""
    problems: list[str] = []
    candidate, baseline = values["candidate-torch-version"], values["baseline-torch-version"]
    for name in ("candidate-torch-version", "baseline-torch-version"):
        if values[name] and values[name] != "auto":  # auto: the CLI reads the pin, and names what is wrong
            problems.append(_problem(parse_spec, name, values[name]))
    if values["base-ref"] and not baseline:
        problems.append("input 'base-ref' names the commit of the baseline's stack (and, with "
                        "'baseline-torch-version: auto', its torch pin); set 'baseline-torch-version', or remove 'base-ref'")
    if not BACKEND_RE.match(values["torch-backend"]):
        problems.append(f"input 'torch-backend' must be auto, pypi, cpu, a CUDA tag like cu128, a ROCm tag like rocm6.4 "
                        f"or xpu, got {values['torch-backend']!r}")
    if values["index-url"] and not URL_RE.match(values["index-url"]):
        problems.append(f"input 'index-url' must be one URL starting with https://, http:// or file://, "
                        f"got {values['index-url']!r}")
    problems += [f"input 'extra-index-url' must be URLs starting with https://, http:// or file://, got {url!r}"
                 for url in split_items(values["extra-index-url"]) if not URL_RE.match(url)]
    if values["device"] not in DEVICES:
        problems.append(f"input 'device' must be one of {', '.join(DEVICES)}, got {values['device']!r}")
    if values["fleet"].strip():
        problems.append(_problem(parse_fleet, "fleet", values["fleet"]))
    for name in ("rtol", "atol"):
        if values[name]:
            problems.append(_problem(tolerance, name, values[name]))
    if values["check-timeout-seconds"]:
        problems.append(_problem(timeout, "check-timeout-seconds", values["check-timeout-seconds"]))
    if values["threads"]:
        problems.append(_problem(threads, "threads", values["threads"]))
    for name, parse in (("ab-budget", timeout), ("undecided", undecided)):
        if values[name]:
            problems.append(_problem(parse, name, values[name]))
            if not baseline:
                problems.append(f"input '{name}' compares with a baseline; set 'baseline-torch-version' too, or remove it")
    for name in ("max-latency-regression", "max-memory-regression", "max-compile-time-regression"):
        if values[name]:
            problems.append(_problem(percent, name, values[name]))
            if not baseline:
                problems.append(f"input '{name}' compares with a baseline; set 'baseline-torch-version' too, or remove it")
    problems += [_problem(latency_limit, "max-latency-ms", item) for item in split_items(values["max-latency-ms"])]
    problems += _fail_on_problems(values["fail-on"])
    problems += _bisect_problems(values)
    problems.append(_upload_problem(values["upload-report"]))
    for name in ("job-summary", "cache", "bisect", "compile-time", "ddp"):
        if values[name].lower() not in (*TRUE, *FALSE):
            problems.append(f"input '{name}' must be true or false, got {values[name]!r}")
    problems += _shared_problems(values["fail-on-shared-failures"], bool(baseline))
    if values["venv-cap"]:
        problems.append(_problem(gigabytes, "venv-cap", values["venv-cap"]))
    if not (candidate or baseline):
        asked = [n for n in ("index-url", "extra-index-url", "find-links", "extra-requirements", "requirements", "extras",
                             "venv-cap") if values[n]]
        if values["cache"].lower() in TRUE:
            asked.append("cache")
        if values["torch-backend"] != "auto":
            asked.insert(0, "torch-backend")
        problems += [f"input '{n}' is used only to install torch; set 'candidate-torch-version' (and/or 'baseline-torch-version') "
                     f"too, or remove it" for n in asked]
    problems += _path_problems(values)
    return [p for p in problems if p]


def _upload_problem(value: str) -> str:
    if value.lower() in (*TRUE, *FALSE) or ARTIFACT_NAME_RE.fullmatch(value):
        return ""
    return (f"input 'upload-report' must be true, false or an artifact name (letters, digits, '.', '_', '-'), "
            f"got {value!r}")


def upload_plan(environ: Mapping[str, str]) -> dict[str, str]:
    """The outputs of the action's upload step: `enabled`, the artifact's `name`, and the report folder's `path`.

    In a `strategy.matrix` every job runs this step: the default name then gets `-<job-index>`
    (action.yml passes `strategy.job-index` and `job-total` as STRATEGY_JOB_INDEX and STRATEGY_JOB_TOTAL), else each job's
    upload would overwrite the last one's. A name the user set is kept as set (one per matrix entry is theirs
    to give)."""
    values = read_inputs(environ)
    value = values["upload-report"]
    if value.lower() in FALSE or _upload_problem(value):  # a bad value: the check step has already said why
        return {"enabled": "false", "name": "", "path": ""}
    name, where = value, ""
    index, total = environ.get("STRATEGY_JOB_INDEX", ""), environ.get("STRATEGY_JOB_TOTAL", "")
    if value.lower() in TRUE:
        name = DEFAULT_ARTIFACT
        if total.isdigit() and int(total) > 1 and index.isdigit():
            name, where = f"{DEFAULT_ARTIFACT}-{int(index)}", f" (job {int(index) + 1} of {int(total)} in a matrix)"
    path = (Path(values["working-directory"]) / values["report-dir"]).resolve()
    if environ.get("ACT") and not environ.get("ACTIONS_RUNTIME_URL"):  # act without an artifact server
        print(f"{PROG}: upload-report: not uploaded, act has no artifact server here (act --artifact-server-path DIR "
              f"gives it one); the report stays in {path}", flush=True)
        return {"enabled": "false", "name": "", "path": ""}
    print(f"{PROG}: upload-report: uploading {path} as artifact {name!r}{where}", flush=True)
    return {"enabled": "true", "name": name, "path": str(path)}


def _shared_problems(text: str, baseline: bool) -> list[str]:
    """Input 'fail-on-shared-failures': '' (the config's, else false), true or false, and only with a baseline."""
    if not text.strip():
        return []
    if text.strip().lower() not in (*TRUE, *FALSE):
        return [f"input 'fail-on-shared-failures' must be true or false (or empty for the config's), got {text!r}"]
    if not baseline:
        return ["input 'fail-on-shared-failures' judges failures the baseline shares; set 'baseline-torch-version' "
                "too, or remove it"]
    return []


def _bisect_problems(values: Mapping[str, str]) -> list[str]:
    if values["bisect"].lower() not in TRUE:
        return (["input 'bisect-good' is used only with 'bisect: true'; set it, or remove 'bisect-good'"]
                if values["bisect-good"] else [])
    problems = []
    if not values["candidate-torch-version"] or values["candidate-torch-version"].lower() == "current":
        problems.append("input 'bisect' searches the builds up to the candidate: set 'candidate-torch-version' to the torch to "
                        "install (a version, nightly or test), or remove 'bisect'")
    good = values["bisect-good"] or values["baseline-torch-version"]
    if not good:
        problems.append("input 'bisect' needs a build known good: set 'bisect-good' (e.g. 2.14.0.dev20261110) or "
                        "'baseline-torch-version'")
    elif not is_version(good):
        source = "bisect-good" if values["bisect-good"] else "baseline-torch-version"
        problems.append(f"input '{source}' must be one torch version to bisect from (like 2.14.0.dev20261110 or "
                        f"2.13.1), got {good!r}; set 'bisect-good' to one")
    return problems


def _fail_on_problems(text: str) -> list[str]:
    items = [item.lower() for item in split_items(text)]
    if items == ["none"]:
        return []
    bad = [item for item in items if item not in FAIL_ON]
    if bad or not items:
        return [f"input 'fail-on' must be a comma-separated list of {', '.join(FAIL_ON)}, or none (report only), "
                f"got {text!r}"]
    return []


def _path_problems(values: Mapping[str, str]) -> list[str]:
    workdir = Path(values["working-directory"])
    if not workdir.is_dir():
        return [f"input 'working-directory' must be an existing folder, got {values['working-directory']!r} "
                f"(from {os.getcwd()})"]
    problems = []
    if values["config"] and not (workdir / values["config"]).is_file():
        problems.append(f"input 'config' must be a file (relative to 'working-directory'), got {values['config']!r}: "
                        f"no such file in {workdir.resolve()}")
    for path in split_items(values["scan"], commas=False):
        if not (workdir / path).exists():
            problems.append(f"input 'scan' must be Python files or folders (relative to 'working-directory'), got "
                            f"{path!r}: not found in {workdir.resolve()}")
    for folder in split_items(values["find-links"], commas=False):
        if not URL_RE.match(folder) and not (workdir / folder).exists():
            problems.append(f"input 'find-links' must be folders or URLs of wheels, got {folder!r}: "
                            f"not found in {workdir.resolve()}")
    return problems


def fail_on(values: Mapping[str, str]) -> tuple[str, ...]:
    items = tuple(item.lower() for item in split_items(values["fail-on"]))
    return () if items == ("none",) else items


def build_argv(values: Mapping[str, str]) -> list[str]:
    """The CLI arguments these (valid) inputs ask for: `compare` with a version or a baseline, else `run`."""
    candidate, baseline = values["candidate-torch-version"], values["baseline-torch-version"]
    if candidate or baseline:
        argv = ["compare", "--candidate", candidate or "current"]
        if baseline:
            argv += ["--baseline", baseline]
        if baseline == "auto" or values["base-ref"]:  # the baseline's stack (and auto's pin) at the base commit
            argv += ["--base-ref", values["base-ref"] or "HEAD^1"]
        argv += _install_flags(values)
        shared = values["fail-on-shared-failures"].strip().lower()
        if shared:  # not a bisect flag: a bisection's good build passes the checks it bisects
            argv.append("--fail-on-shared-failures" if shared in TRUE else "--no-fail-on-shared-failures")
    else:
        argv = ["run", "--python", values["python"]]
    argv += ["--device", values["device"], "--out", values["report-dir"]]
    argv += _repeat("--scan", split_items(values["scan"], commas=False))  # the api check: not a bisect flag
    return argv + _check_flags(values, split_items(values["checks"]))


def bisect_argv(values: Mapping[str, str], bad: str, failed: Sequence[str]) -> list[str]:
    """`bisect` from the good build to the candidate's installed version `bad`, on the checks that failed,
    with the same install and check flags as the compare; its files go to REPORT_DIR/bisect."""
    good = values["bisect-good"] or values["baseline-torch-version"]
    argv = ["bisect", "--good", good, "--bad", bad, *_install_flags(values), "--device", values["device"],
            "--out", str(Path(values["report-dir"]) / "bisect")]
    return argv + _check_flags(values, failed)


def _install_flags(values: Mapping[str, str]) -> list[str]:
    argv = ["--python", values["python"]]
    if values["torch-backend"] != "auto":
        argv += ["--torch-backend", values["torch-backend"]]
    if values["index-url"]:
        argv += ["--index-url", values["index-url"]]
    argv += _repeat("--extra-index-url", split_items(values["extra-index-url"]))
    argv += _repeat("--find-links", split_items(values["find-links"], commas=False))
    argv += _repeat("--extra-requirement", split_items(values["extra-requirements"], commas=False))
    argv += _repeat("--requirements", split_items(values["requirements"], commas=False))
    if values["extras"]:
        argv += ["--extras", ",".join(split_items(values["extras"]))]
    if values["venv-cap"]:
        argv += ["--venv-cap", values["venv-cap"]]
    for name in ("max-latency-regression", "max-memory-regression", "max-compile-time-regression", "ab-budget",
                 "undecided"):
        if values[name]:
            argv += [f"--{name}", values[name].strip().lower() if name == "undecided" else values[name]]
    return argv


def _check_flags(values: Mapping[str, str], only: Sequence[str]) -> list[str]:
    argv = ["--config", values["config"]] if values["config"] else []
    argv += ["--fleet", values["fleet"]] if values["fleet"].strip() else []
    argv += _repeat("--only", only)
    for name, flag in (("rtol", "--rtol"), ("atol", "--atol"), ("check-timeout-seconds", "--timeout"),
                       ("threads", "--threads")):
        if values[name]:
            argv += [flag, values[name]]
    argv += _repeat("--max-latency-ms", [item.replace(" ", "") for item in split_items(values["max-latency-ms"])])
    argv += ["--fail-on", ",".join(fail_on(values)) or "none"]
    argv += [flag for name, flag in (("compile-time", "--compile-time"), ("ddp", "--ddp"))
             if values[name].lower() in TRUE]
    if values["job-summary"].lower() in FALSE:
        argv.append("--no-job-summary")
    return argv


def _repeat(flag: str, items: Sequence[str]) -> list[str]:
    return [x for item in items for x in (flag, item)]


def plan(environ: Mapping[str, str]) -> Plan:
    values = read_inputs(environ)
    problems = alias_notes(environ)[1] + validate(values)
    if problems:
        return Plan((), Path(values["working-directory"]), (), tuple(problems))
    return Plan(tuple(build_argv(values)), Path(values["working-directory"]), fail_on(values))


def cache_key(values: Mapping[str, str], *, python_version: str, system: str, machine: str, today: str) -> str:
    """The key of the torch venvs in GitHub's cache: everything that decides what gets installed (as given; the
    versions they resolve to are in the venvs' own records), the Python, the OS and architecture, and for a
    nightly, a release candidate or a range the day, so a cached one is never older than a day."""
    asked = {name: values[name] for name in CACHE_INPUTS}
    digest = hashlib.sha256(json.dumps(asked, sort_keys=True).encode()).hexdigest()[:16]
    moving = any(parse_spec(values[n], n).kind in ("nightly", "test", "range")
                 for n in ("candidate-torch-version", "baseline-torch-version") if values[n])
    return (f"torch-upgrade-check-venvs-v1-{system}-{machine}-py{python_version}-{digest}"
            + (f"-{today}" if moving else ""))


def cache_plan(environ: Mapping[str, str]) -> dict[str, str]:
    """The outputs of the action's cache-key step: `enabled` (`true` or `false`), `key` and `path`."""
    values = read_inputs(environ)
    off = {"enabled": "false", "key": "", "path": ""}
    if values["cache"].lower() not in TRUE:
        return off
    specs = [values[n] for n in ("candidate-torch-version", "baseline-torch-version") if values[n]]
    try:
        if not specs or all(parse_spec(s, "candidate-torch-version").kind == "current" for s in specs):
            print(f"{PROG}: cache: off, nothing to install (no candidate-torch-version but current)", flush=True)
            return off
    except UsageError:
        return off  # the check step reports the bad input
    if environ.get("RUNNER_ENVIRONMENT") == "self-hosted":
        print(f"{PROG}: cache: off on a self-hosted runner: its venvs stay on its disk (see input 'venv-cap')",
              flush=True)
        return off
    workdir = Path(values["working-directory"])
    python = values["python"]
    if os.sep in python or (os.altsep and os.altsep in python):
        python = str((workdir / python).resolve())
    try:
        version = python_version(python)
    except (InfrastructureError, subprocess.SubprocessError):
        return off  # the check step reports the interpreter
    key = cache_key(values, python_version=version, system=platform.system().lower(), machine=platform.machine().lower(),
                    today=time.strftime("%Y%m%d", time.gmtime()))
    # a pull request's venvs live in a store of their own (store.store_root), so they are cached apart
    path = str(store_root(default_venv_dir(environ), environ))
    key += "-pr" if untrusted(environ) else ""
    print(f"{PROG}: cache: key {key} for {path}", flush=True)
    return {"enabled": "true", "key": key, "path": path}


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


def main(environ: Mapping[str, str] | None = None, argv: Sequence[str] = ()) -> int:
    environ = os.environ if environ is None else environ
    if list(argv) == ["cache-key"]:
        github.set_outputs(cache_plan(environ), environ=environ)
        return 0
    if list(argv) == ["upload"]:
        github.set_outputs(upload_plan(environ), environ=environ)
        return 0
    for note in alias_notes(environ)[0]:  # here only, not in cache-key: once per run
        print(f"{PROG}: warning: {note}", file=sys.stderr, flush=True)
        github.warning(f"{PROG}: deprecated input", note, environ=environ)
    p = plan(environ)
    if p.problems:
        for problem in p.problems:
            print(f"{PROG}: error: {problem}", file=sys.stderr)
        github.stopped_early(p.problems, environ=environ)
        return EXIT_USAGE
    print(f"{PROG}: in {p.cwd}: {shlex.join([PROG, *p.argv])}", flush=True)
    try:
        rc = subprocess.run([sys.executable, "-m", "torch_upgrade_check", *p.argv], cwd=p.cwd, check=False).returncode
    except OSError as e:
        problem = f"could not start the CLI with {sys.executable}: {e}"
        print(f"{PROG}: error: {problem}", file=sys.stderr)
        github.stopped_early([problem], environ=environ, title="torch-upgrade-check: infrastructure error")
        return EXIT_INFRA
    if rc == 0:
        return 0
    why = {
        EXIT_FAILED: f"thresholds crossed (fail-on: {','.join(p.fail_on) or 'none'}); the summary says which checks",
        EXIT_USAGE: "a usage or configuration error (the line above says which)",
        EXIT_INFRA: "an infrastructure error: torch could not be installed or run; the report says why",
    }.get(rc, f"the CLI ended with exit code {rc}")
    values = read_inputs(environ)
    if rc == EXIT_FAILED and values["bisect"].lower() in TRUE:
        bisect_after_failure(values, p.cwd, environ)
    print(f"{PROG}: failing the step: {why}", file=sys.stderr, flush=True)
    if rc in (EXIT_FAILED, EXIT_USAGE, EXIT_INFRA):
        return rc  # the CLI wrote the outputs and annotations itself
    # killed (a signal, the runner out of memory) before it could say anything: the outputs say error
    github.stopped_early([f"torch-upgrade-check ended with exit code {rc}; the step's log shows how far it got"],
                         environ=environ, title="torch-upgrade-check: infrastructure error")
    return EXIT_INFRA


if __name__ == "__main__":
    sys.exit(main(argv=sys.argv[1:]))
