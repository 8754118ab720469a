"""The action's inputs: read from env (INPUT_<NAME>, old names as aliases), their defaults, and every problem
with them, one sentence each naming the input, the value and the fix (no torch)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path

from torch_upgrade_check.analysis.fleet import parse_fleet
from torch_upgrade_check.errors import UsageError
from torch_upgrade_check.model import FAIL_ON
from torch_upgrade_check.orchestrate.builds import is_version
from torch_upgrade_check.orchestrate.provision import BACKEND_RE, parse_spec
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
