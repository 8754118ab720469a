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
from torch_upgrade_check.errors import EXIT_FAILED, EXIT_INFRA, EXIT_USAGE, UsageError
from torch_upgrade_check.orchestrate.provision import BACKEND_RE, parse_spec, python_version
from torch_upgrade_check.orchestrate.store import default_venv_dir, store_root, untrusted
from torch_upgrade_check.orchestrate.workers import InfrastructureError
from torch_upgrade_check.values import gigabytes, latency_limit, percent, timeout, tolerance

PROG = "torch-upgrade-check"

# Every input of action.yml, in its order; each reaches this module as env var INPUT_<NAME>.
INPUTS: tuple[str, ...] = (
    "torch-version", "baseline-torch-version", "torch-backend", "index-url", "extra-index-url", "find-links",
    "extra-requirements", "venv-cap", "cache", "device", "config", "suite", "rtol", "atol", "max-latency-regression",
    "max-memory-regression", "max-latency-ms", "timeout", "fail-on", "python", "working-directory",
    "job-summary", "report-dir",
)
DEFAULTS: dict[str, str] = {
    "torch-backend": "auto", "device": "auto", "fail-on": "correctness,latency,memory", "python": "python3",
    "working-directory": ".", "job-summary": "true", "report-dir": "torch-upgrade-check-report", "cache": "false",
}
# The inputs that decide which torch venvs get built: the cache key hashes them.
CACHE_INPUTS = ("torch-version", "baseline-torch-version", "torch-backend", "index-url", "extra-index-url",
                "find-links", "extra-requirements")
DEVICES = ("auto", "cpu", "cuda", "mps")
FAIL_ON = ("correctness", "latency", "memory")
URL_RE = re.compile(r"^(https?|file)://\S+$")
TRUE, FALSE = ("true", "yes", "1", "on"), ("false", "no", "0", "off")


def env_name(input_name: str) -> str:
    """`max-latency-ms` -> `INPUT_MAX_LATENCY_MS`."""
    return "INPUT_" + input_name.upper().replace("-", "_")


def read_inputs(environ: Mapping[str, str]) -> dict[str, str]:
    """The inputs as strings, stripped; a missing or blank input takes its default."""
    values = {}
    for name in INPUTS:
        value = environ.get(env_name(name), "").strip()
        values[name] = value or DEFAULTS.get(name, "")
    return values


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
    candidate, baseline = values["torch-version"], values["baseline-torch-version"]
    for name in ("torch-version", "baseline-torch-version"):
        if values[name]:
            problems.append(_problem(parse_spec, name, values[name]))
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
    for name in ("rtol", "atol"):
        if values[name]:
            problems.append(_problem(tolerance, name, values[name]))
    if values["timeout"]:
        problems.append(_problem(timeout, "timeout", values["timeout"]))
    for name in ("max-latency-regression", "max-memory-regression"):
        if values[name]:
            problems.append(_problem(percent, name, values[name]))
            if not baseline:
                problems.append(f"input '{name}' compares with a baseline; set 'baseline-torch-version' too, or remove it")
    problems += [_problem(latency_limit, "max-latency-ms", item) for item in split_items(values["max-latency-ms"])]
    problems += _fail_on_problems(values["fail-on"])
    for name in ("job-summary", "cache"):
        if values[name].lower() not in (*TRUE, *FALSE):
            problems.append(f"input '{name}' must be true or false, got {values[name]!r}")
    if values["venv-cap"]:
        problems.append(_problem(gigabytes, "venv-cap", values["venv-cap"]))
    if not (candidate or baseline):
        asked = [n for n in ("index-url", "extra-index-url", "find-links", "extra-requirements", "venv-cap") if values[n]]
        if values["cache"].lower() in TRUE:
            asked.append("cache")
        if values["torch-backend"] != "auto":
            asked.insert(0, "torch-backend")
        problems += [f"input '{n}' is used only to install torch; set 'torch-version' (and/or 'baseline-torch-version') "
                     f"too, or remove it" for n in asked]
    problems += _path_problems(values)
    return [p for p in problems if p]


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
    candidate, baseline = values["torch-version"], values["baseline-torch-version"]
    if candidate or baseline:
        argv = ["compare", "--candidate", candidate or "current"]
        if baseline:
            argv += ["--baseline", baseline]
        argv += ["--python", values["python"]]
        if values["torch-backend"] != "auto":
            argv += ["--torch-backend", values["torch-backend"]]
        if values["index-url"]:
            argv += ["--index-url", values["index-url"]]
        argv += _repeat("--extra-index-url", split_items(values["extra-index-url"]))
        argv += _repeat("--find-links", split_items(values["find-links"], commas=False))
        argv += _repeat("--extra-requirement", split_items(values["extra-requirements"], commas=False))
        if values["venv-cap"]:
            argv += ["--venv-cap", values["venv-cap"]]
        for name in ("max-latency-regression", "max-memory-regression"):
            if values[name]:
                argv += [f"--{name}", values[name]]
    else:
        argv = ["run", "--python", values["python"]]
    argv += ["--device", values["device"], "--out", values["report-dir"]]
    if values["config"]:
        argv += ["--config", values["config"]]
    argv += _repeat("--only", split_items(values["suite"]))
    for name in ("rtol", "atol", "timeout"):
        if values[name]:
            argv += [f"--{name}", values[name]]
    argv += _repeat("--max-latency-ms", [item.replace(" ", "") for item in split_items(values["max-latency-ms"])])
    argv += ["--fail-on", ",".join(fail_on(values)) or "none"]
    if values["job-summary"].lower() in FALSE:
        argv.append("--no-job-summary")
    return argv


def _repeat(flag: str, items: Sequence[str]) -> list[str]:
    return [x for item in items for x in (flag, item)]


def plan(environ: Mapping[str, str]) -> Plan:
    values = read_inputs(environ)
    problems = validate(values)
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
                 for n in ("torch-version", "baseline-torch-version") if values[n])
    return (f"torch-upgrade-check-venvs-v1-{system}-{machine}-py{python_version}-{digest}"
            + (f"-{today}" if moving else ""))


def cache_plan(environ: Mapping[str, str]) -> dict[str, str]:
    """The outputs of the action's cache-key step: `enabled` (`true` or `false`), `key` and `path`."""
    values = read_inputs(environ)
    off = {"enabled": "false", "key": "", "path": ""}
    if values["cache"].lower() not in TRUE:
        return off
    specs = [values[n] for n in ("torch-version", "baseline-torch-version") if values[n]]
    try:
        if not specs or all(parse_spec(s, "torch-version").kind == "current" for s in specs):
            print(f"{PROG}: cache: off, nothing to install (no torch-version but current)", flush=True)
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


def main(environ: Mapping[str, str] | None = None, argv: Sequence[str] = ()) -> int:
    environ = os.environ if environ is None else environ
    if list(argv) == ["cache-key"]:
        github.set_outputs(cache_plan(environ), environ=environ)
        return 0
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
    print(f"{PROG}: failing the step: {why}", file=sys.stderr, flush=True)
    if rc in (EXIT_FAILED, EXIT_USAGE, EXIT_INFRA):
        return rc  # the CLI wrote the outputs and annotations itself
    # killed (a signal, the runner out of memory) before it could say anything: the outputs say error
    github.stopped_early([f"torch-upgrade-check ended with exit code {rc}; the step's log shows how far it got"],
                         environ=environ, title="torch-upgrade-check: infrastructure error")
    return EXIT_INFRA


if __name__ == "__main__":
    sys.exit(main(argv=sys.argv[1:]))
