"""The action's (valid) inputs -> the CLI command the step runs: `compare` with a version or a baseline, else
`run`; and the `bisect` after a failed compare (no torch)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from torch_upgrade_check.action.inputs import FALSE, TRUE, alias_notes, fail_on, read_inputs, split_items, validate


@dataclass(frozen=True)
class Plan:
    """What to run: the argv after `torch-upgrade-check`, where, and what the inputs asked of the failure."""

    argv: tuple[str, ...]
    cwd: Path
    fail_on: tuple[str, ...]
    problems: tuple[str, ...] = field(default=())


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
