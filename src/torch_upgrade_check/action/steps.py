"""The action's steps beside the check: `cache-key` before it (whether and under which key the torch venvs are
cached) and `upload` after it (the report's artifact name and folder) (no torch)."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

from torch_upgrade_check.action.inputs import DEFAULT_ARTIFACT, FALSE, PROG, TRUE, _upload_problem, read_inputs
from torch_upgrade_check.errors import UsageError
from torch_upgrade_check.orchestrate.provision import parse_spec, python_version
from torch_upgrade_check.orchestrate.store import default_venv_dir, store_root, untrusted
from torch_upgrade_check.orchestrate.workers import InfrastructureError

# The inputs that decide which torch venvs get built: the cache key hashes them.
CACHE_INPUTS = ("candidate-torch-version", "baseline-torch-version", "torch-backend", "index-url", "extra-index-url",
                "find-links", "extra-requirements", "requirements", "extras")


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


def cache_key(values: Mapping[str, str], *, python_version: str, system: str, machine: str, today: str) -> str:
    """The key of the torch venvs in GitHub's cache: everything that decides what gets installed (as given; the
    versions they resolve to are in the venvs' own records), the Python, the OS and architecture, and for a
    nightly, a release candidate, `latest` or a range the day, so a cached one is never older than a day."""
    asked = {name: values[name] for name in CACHE_INPUTS}
    digest = hashlib.sha256(json.dumps(asked, sort_keys=True).encode()).hexdigest()[:16]
    moving = any(parse_spec(values[n], n).kind in ("nightly", "test", "latest", "range")
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
