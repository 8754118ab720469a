"""Every lock format a team commits (locks.py): `auto` reads each side's torch from its lock, made by the real tool where
it locks fast (uv lock, uv export --format pylock.toml; poetry lock in a slow test), else written in the format the
tool documents (pdm.lock, Pipfile.lock)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.markers import Marker
from team_repo import commit, git

from torch_upgrade_check import stack
from torch_upgrade_check.commands.settings import CompareSettings
from torch_upgrade_check.errors import UsageError

PYPROJECT = """\
[project]
name = "team-app"
version = "0.1.0"
requires-python = ">=3.10"
dependencies = ["{torch}", "requests"]
"""


def tool(name: str) -> str:
    """The real locker, installed beside this Python by the test extras (or on PATH)."""
    found = Path(sys.executable).parent / name
    path = str(found) if found.is_file() else shutil.which(name)
    assert path, f"{name} is not installed; pip install -e '.[test]'"
    return path


def run(repo: Path, *cmd: str, timeout: float = 300) -> None:
    env = {**os.environ, "UV_NO_PROGRESS": "1", "POETRY_VIRTUALENVS_CREATE": "false"}
    proc = subprocess.run(cmd, cwd=repo, capture_output=True, text=True, timeout=timeout, env=env, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def compare(*flags: str) -> CompareSettings:
    """compare's settings as the CLI builds them: each side's `auto` read at its ref."""
    from torch_upgrade_check import cli
    from torch_upgrade_check.commands import settings

    argv = ["compare", "--baseline", "auto", "--candidate", "auto", "--base-ref", "main", *flags]
    return settings.build(cli.build_parser().parse_args(argv), argv)


@pytest.fixture(scope="module")
def uv_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A uv project (pyproject `torch>=2.12`, locked by the real `uv lock` at 2.13.0 on main) whose branch `bump`
    changes only uv.lock, to 2.14.1 (Renovate's and Dependabot's pull request for uv teams), and pylock.toml as
    `uv export --format pylock.toml` writes it, on both."""
    repo = tmp_path_factory.mktemp("uv") / "team"
    repo.mkdir()
    uv = tool("uv")
    git(repo, "init", "-q")
    (repo / "pyproject.toml").write_text(PYPROJECT.format(torch="torch>=2.12"))
    for branch, version in (("main", "2.13.0"), ("bump", "2.14.1")):
        if branch != "main":
            git(repo, "checkout", "-qb", branch)
        run(repo, uv, "lock", "--upgrade-package", f"torch=={version}")
        run(repo, uv, "export", "--format", "pylock.toml", "-o", "pylock.toml", "--quiet")
        git(repo, "add", ".")
        git(repo, "commit", "-qm", f"lock torch {version}")
    assert git(repo, "diff", "--name-only", "main", "bump").split() == ["pylock.toml", "uv.lock"]
    return repo


@pytest.mark.parametrize("files", [["uv.lock"], ["pyproject.toml", "uv.lock"], ["pylock.toml"],
                                   ["pyproject.toml", "pylock.toml"]])
def test_a_lock_only_bump_is_read_from_each_sides_lock(uv_repo: Path, monkeypatch: pytest.MonkeyPatch,
                                                       files: list[str]) -> None:
    monkeypatch.chdir(uv_repo)
    s = compare(*(f for name in files for f in ("--requirements", name)))
    assert (s.baseline, s.candidate) == ("2.13.0", "2.14.1")  # the lock's pin, not pyproject's >=2.12 on both sides
    assert s.baseline_spec.requirement == "torch==2.13.0" and s.candidate_spec.requirement == "torch==2.14.1"
    # the companions come from the lock too, each side's own
    assert any(r.startswith("requests==") for r in s.stacks["candidate"].requirements), s.stacks["candidate"]


def test_a_lock_that_pins_torch_per_python_picks_this_runners_entry(tmp_path: Path) -> None:
    """The real `uv lock` of `torch>=2.12` locks one torch a Python where the newest torch left an old Python behind;
    the runner's entry (its markers evaluated by packaging) is the one auto reads."""
    (tmp_path / "pyproject.toml").write_text(PYPROJECT.format(torch="torch>=2.12"))
    run(tmp_path, tool("uv"), "lock")
    data = stack.tomllib.loads((tmp_path / "uv.lock").read_text())
    torches = [p for p in data["package"] if p["name"] == "torch"]
    here = [p["version"] for p in torches
            if any(Marker(m).evaluate() for m in p.get("resolution-markers") or ["python_version > '0'"])]
    assert len(here) == 1, torches
    found = stack.load([tmp_path / "uv.lock"])
    assert found.locked == ((str(tmp_path / "uv.lock"), here[0]),)
    assert stack.torch_spec(found, "here") == here[0]


def test_a_lock_stale_against_its_project_names_both(uv_repo: Path, tmp_path: Path) -> None:
    project = tmp_path / "pyproject.toml"
    project.write_text(PYPROJECT.format(torch="torch>=2.14"))
    shutil.copy(uv_repo / "pylock.toml", tmp_path / "pylock.toml")  # bump's: 2.14.1
    assert stack.torch_spec(stack.load([project, tmp_path / "pylock.toml"]), "here") == "2.14.1"
    (tmp_path / "uv.lock").write_text(git(uv_repo, "show", "main:uv.lock"))  # 2.13.0, which torch>=2.14 excludes
    with pytest.raises(UsageError) as e:
        stack.torch_spec(stack.load([project, tmp_path / "uv.lock"]), "in the working tree")
    assert ("uv.lock in the working tree pins torch 2.13.0, which the stack's torch>=2.14 excludes: the lock is stale"
            in e.value.problems[0]), e.value.problems


# pdm.lock as `pdm lock` 2.29 writes it (lock_version 4.5.x; a package's `marker`, its dependencies as requirements),
# with torch locked per platform: the CPU wheel's local version on Linux, PyPI's elsewhere
PDM_LOCK = """\
# This file is @generated by PDM.
[metadata]
groups = ["default"]
strategy = ["inherit_metadata"]
lock_version = "4.5.1"
content_hash = "sha256:0"

[[package]]
name = "requests"
version = "2.34.2"
requires_python = ">=3.10"
groups = ["default"]
dependencies = ["urllib3<3,>=1.26"]

[[package]]
name = "urllib3"
version = "2.5.0"
groups = ["default"]

[[package]]
name = "torch"
version = "2.13.0+cpu"
marker = "sys_platform == \\"linux\\""
groups = ["default"]
dependencies = ["sympy>=1.13.3"]

[[package]]
name = "torch"
version = "2.13.0"
marker = "sys_platform != \\"linux\\""
groups = ["default"]
dependencies = ["sympy>=1.13.3"]

[[package]]
name = "sympy"
version = "1.14.0"
groups = ["default"]
"""

# Pipfile.lock as `pipenv lock` writes it (pipfile-spec 6): no graph, a version and markers a package
PIPFILE_LOCK = {
    "_meta": {"hash": {"sha256": "0"}, "pipfile-spec": 6, "requires": {"python_version": "3.11"},
              "sources": [{"name": "pypi", "url": "https://pypi.org/simple", "verify_ssl": True}]},
    "default": {
        "torch": {"hashes": ["sha256:0"], "index": "pypi", "markers": "python_full_version >= '3.10.0'",
                  "version": "==2.14.1"},
        "requests": {"hashes": ["sha256:0"], "index": "pypi", "version": "==2.34.2"},
        "pywin32": {"hashes": ["sha256:0"], "markers": "sys_platform == 'win32'", "version": "==311"},
        "team-app": {"editable": True, "path": "."},
    },
    "develop": {"pytest": {"hashes": ["sha256:0"], "version": "==8.4.2"}},
}


def test_pdm_lock_picks_the_runners_torch_and_pins_what_torch_does_not_need(tmp_path: Path) -> None:
    found = stack.load([stack_file(tmp_path, "pdm.lock", PDM_LOCK)])
    linux = Marker("sys_platform == 'linux'").evaluate()
    assert stack.torch_spec(found, "here") == ("2.13.0+cpu" if linux else "2.13.0")
    assert found.requirements == ("requests==2.34.2", "urllib3==2.5.0")  # sympy comes with each side's torch


def test_pipfile_lock_pins_every_package_whose_marker_holds_here(tmp_path: Path) -> None:
    found = stack.load([stack_file(tmp_path, "Pipfile.lock", json.dumps(PIPFILE_LOCK))])
    assert stack.torch_spec(found, "here") == "2.14.1"
    windows = Marker("sys_platform == 'win32'").evaluate()
    assert found.requirements == ("pytest==8.4.2", *(("pywin32==311",) if windows else ()), "requests==2.34.2")


@pytest.mark.parametrize(("name", "text", "problem"), [
    ("pdm.lock", PDM_LOCK.replace('marker = "sys_platform != \\"linux\\""', 'marker = "sys_platform == \\"linux\\""'),
     "pdm.lock pins torch 2.13.0 and 2.13.0+cpu for this runner's platform; lock one"),
    ("pdm.lock", PDM_LOCK.replace('"4.5.1"', '"3.1"'), "pdm.lock lock_version '3.1' is not supported"),
    ("Pipfile.lock", json.dumps({**PIPFILE_LOCK, "_meta": {"pipfile-spec": 9}}), "pipfile-spec 9 is not supported"),
    ("Pipfile.lock", "{", "Pipfile.lock: invalid JSON"),
    ("pylock.toml", 'lock-version = "2.0"\n', "PEP 751 lock-version '2.0' is not supported"),
    ("pylock.toml", 'lock-version = "1.0"\n[[packages]]\nname = "torch"\nversion = "2.13.0"\nmarker = "python_version < \'3\'"\n',
     "pylock.toml pins torch 2.13.0 for other platforms only"),
])
def test_a_lock_this_tool_cannot_read_says_what_to_do(tmp_path: Path, name: str, text: str, problem: str) -> None:
    if "for this runner's platform" in problem and not Marker("sys_platform == 'linux'").evaluate():
        pytest.skip("the two torch entries both hold on Linux only")
    with pytest.raises(UsageError) as e:
        stack.torch_spec(stack.load([stack_file(tmp_path, name, text)]), "here")
    assert problem in e.value.problems[0], e.value.problems


def stack_file(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path


@pytest.mark.slow
def test_a_poetry_lock_bump_is_read_from_each_sides_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real `poetry lock` (about 30 s a lock with torch's metadata from PyPI): main locks the project's
    `torch>=2.12,<2.14`, the pull request widens it and moves torch in the lock; each side's lock decides."""
    repo = tmp_path / "team"
    repo.mkdir()
    git(repo, "init", "-q")
    poetry = tool("poetry")
    for branch, torch in (("main", "torch>=2.12,<2.14"), ("bump", "torch>=2.12,<2.15")):
        if branch != "main":
            git(repo, "checkout", "-qb", branch)
        (repo / "pyproject.toml").write_text(PYPROJECT.format(torch=torch))
        # poetry lock keeps what is locked: the pull request's `poetry update --lock torch` moves torch
        run(repo, poetry, *(["lock"] if branch == "main" else ["update", "--lock", "torch"]), timeout=600)
        commit(repo, f"lock {torch}", {})
    monkeypatch.chdir(repo)
    s = compare("--requirements", "pyproject.toml", "--requirements", "poetry.lock")
    assert (s.baseline, s.candidate) == ("2.13.0", "2.14.1")


def _bump_repo(tmp_path: Path, main: dict[str, str], bump: dict[str, str]) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    commit(repo, "the stack", main)
    git(repo, "checkout", "-qb", "bump")
    commit(repo, "the pull request", bump)
    return repo


def test_a_pull_request_that_leaves_torch_alone_compares_the_stacks_and_says_so(tmp_path: Path,
                                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from torch_upgrade_check.commands.stack_checks import nothing_compared, unchanged_torch_note

    monkeypatch.chdir(_bump_repo(tmp_path, {"requirements.txt": "torch==2.13.0\ntimm==1.0.30\n"},
                                 {"requirements.txt": "torch==2.13.0\ntimm==1.0.31\n"}))
    s = compare("--requirements", "requirements.txt")
    assert (s.baseline, s.candidate) == ("2.13.0", "2.13.0")
    assert unchanged_torch_note(s) == ("torch 2.13.0 on both sides: the pull request leaves torch alone and changes "
                                       "the stack (timm); each side installs its own stack, and the checks compare "
                                       "the stacks")
    assert nothing_compared(s, {"baseline": "2.13.0+cpu", "candidate": "2.13.0+cpu"}, "install") is None


def test_what_each_side_got_is_held_to_the_pins_its_files_moved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from torch_upgrade_check.commands.stack_checks import nothing_compared

    monkeypatch.chdir(_bump_repo(tmp_path, {"requirements.txt": "torch==2.13.0\n"}, {"requirements.txt": "torch==2.14.1\n"}))
    s = compare("--requirements", "requirements.txt")
    assert nothing_compared(s, {"baseline": "2.13.0+cpu", "candidate": "2.14.1"}, "install") is None
    same = nothing_compared(s, {"baseline": "2.14.1", "candidate": "2.14.1"}, "install")
    assert same is not None and same.startswith(
        "the pull request moves torch's pin (requirements.txt at --base-ref main: 2.13.0; requirements.txt in the "
        "working tree: 2.14.1), but both sides install torch 2.14.1: nothing would be compared;"), same
    other = nothing_compared(s, {"baseline": "2.12.0", "candidate": "2.14.1"}, "install")
    assert other is not None and other.startswith(
        "the baseline's requirements.txt at --base-ref main pins torch 2.13.0, but it would install torch 2.12.0"), other
    fixed = compare("--requirements", "requirements.txt", "--candidate", "2.13.0")  # a version given: not the files'
    assert nothing_compared(fixed, {"baseline": "2.13.0", "candidate": "2.14.1"}, "install") is None


def _sides(*flags: str) -> CompareSettings:
    from torch_upgrade_check import cli
    from torch_upgrade_check.commands import settings

    argv = ["compare", "--requirements", "requirements.txt", *flags]
    return settings.build(cli.build_parser().parse_args(argv), argv)


@pytest.mark.parametrize(("flags", "asked"), [
    (["--baseline", "auto", "--base-ref", "main", "--candidate", "2.13.0"],
     "--baseline auto (requirements.txt at --base-ref main: 2.13.0) and --candidate 2.13.0"),
    (["--baseline", "2.13.0", "--candidate", "auto"],
     "--baseline 2.13.0 and --candidate auto (requirements.txt in the working tree: 2.14.1)"),
    (["--baseline", "2.13.0", "--candidate", ">=2.13"], "--baseline 2.13.0 and --candidate >=2.13"),
    (["--baseline", "current", "--candidate", "2.14.1"], "--baseline current and --candidate 2.14.1"),
])
def test_one_side_given_that_installs_the_same_torch_on_both_is_the_teams_input(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flags: list[str], asked: str) -> None:
    """Issue 45 item 2's gap: a side given (a version, a range, current) beside `auto` or another SPEC, and both sides
    get the same torch: exit 2 naming both requests and the torch, before a check could pass."""
    from torch_upgrade_check.commands.stack_checks import nothing_compared

    monkeypatch.chdir(_bump_repo(tmp_path, {"requirements.txt": "torch==2.13.0\n"}, {"requirements.txt": "torch==2.14.1\n"}))
    s = _sides(*flags)
    for torch in ("2.13.0+cpu", "2.14.1"):
        line = nothing_compared(s, {"baseline": torch, "candidate": torch}, "install")
        assert line == (f"{asked} are different requests, but both sides install torch {torch}: nothing would be "
                        "compared; pass the two torches you mean (--baseline VERSION --candidate VERSION), or the same "
                        "SPEC on both sides for an A/A"), line
    assert nothing_compared(s, {"baseline": "2.13.0+cpu", "candidate": "2.14.1"}, "install") is None


@pytest.mark.parametrize("spec", ["2.13.0", ">=2.13", "current"])
def test_the_same_spec_given_on_both_sides_is_an_aa_and_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             spec: str) -> None:
    from torch_upgrade_check.commands.stack_checks import nothing_compared

    monkeypatch.chdir(_bump_repo(tmp_path, {"requirements.txt": "torch==2.13.0\n"}, {"requirements.txt": "torch==2.14.1\n"}))
    s = _sides("--baseline", spec, "--candidate", spec)
    assert nothing_compared(s, {"baseline": "2.13.0+cpu", "candidate": "2.13.0+cpu"}, "install") is None
    prepared = _sides("--baseline-python", sys.executable, "--candidate", spec)  # an interpreter the team prepared
    assert nothing_compared(prepared, {"baseline": "2.13.0+cpu", "candidate": "2.13.0+cpu"}, "install") is None


@pytest.mark.slow
def test_a_pin_moved_that_resolves_to_the_same_torch_is_the_teams_input_not_a_pass(tmp_path: Path) -> None:
    """The pull request moves torch's range, and both ranges resolve torch 2.13.0: exit 2 naming the file and both
    pins, before anything is installed (pip's dry run of each side's torch)."""
    from conftest import run_cli

    repo = _bump_repo(tmp_path, {"requirements.txt": "torch>=2.12,<2.14\n"}, {"requirements.txt": "torch>=2.13,<2.14\n"})
    proc = run_cli("compare", "--baseline", "auto", "--candidate", "auto", "--base-ref", "main", "--installer", "pip",
                   "--torch-backend", "pypi", "--requirements", "requirements.txt", "--device", "cpu",
                   "--venv-dir", str(tmp_path / "venvs"), "--out", str(tmp_path / "out"), cwd=repo)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = proc.stderr.strip().splitlines()[0]
    assert ("the pull request moves torch's pin (requirements.txt at --base-ref main: <2.14,>=2.12; requirements.txt "
            "in the working tree: <2.14,>=2.13), but both sides resolve torch 2.13.0") in line, proc.stderr
    assert not (tmp_path / "venvs").exists()  # nothing installed, nothing PASSED


@pytest.mark.slow
def test_both_sides_installing_the_same_torch_for_a_moved_pin_is_exit_2_not_passed(tmp_path: Path) -> None:
    """The same pull request with resolve left out (--only): each side's venv is installed (torch 2.13.0 twice), and the
    installed torch, read by each side's probe, stops the run before any check could pass."""
    from conftest import run_cli

    repo = _bump_repo(tmp_path, {"requirements.txt": "torch>=2.12,<2.14\n"}, {"requirements.txt": "torch>=2.13,<2.14\n"})
    proc = run_cli("compare", "--baseline", "auto", "--candidate", "auto", "--base-ref", "main", "--installer", "pip",
                   "--torch-backend", "pypi", "--requirements", "requirements.txt", "--device", "cpu",
                   "--only", "stack[-]/imports", "--venv-dir", str(tmp_path / "venvs"), "--out", str(tmp_path / "out"),
                   cwd=repo)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = proc.stderr.strip().splitlines()[0]
    assert "but both sides install torch 2.13.0" in line and "requirements.txt at --base-ref main" in line, proc.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert [r["label"].split("+")[0] for r in report["reports"]] == ["2.13.0", "2.13.0"]
    assert all(not r["results"] for r in report["reports"])  # no check ran, so none passed


@pytest.mark.slow
def test_a_range_given_that_installs_the_baselines_torch_is_exit_2_not_passed(tmp_path: Path) -> None:
    """`--baseline 2.13.0 --candidate '>=2.13,<2.14'`: both sides install torch 2.13.0; the installed torch, read by each
    side's probe, stops the run (exit 2 naming both requests) before any check could pass."""
    from conftest import run_cli

    proc = run_cli("compare", "--baseline", "2.13.0", "--candidate", ">=2.13,<2.14", "--installer", "pip",
                   "--torch-backend", "pypi", "--device", "cpu", "--only", "mlp[float32]/numerics",
                   "--venv-dir", str(tmp_path / "venvs"), "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = proc.stderr.strip().splitlines()[0]
    assert line.startswith("torch-upgrade-check: error: --baseline 2.13.0 and --candidate >=2.13,<2.14 are different "
                           "requests, but both sides install torch 2.13.0"), proc.stderr
    assert "Traceback" not in proc.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert all(not r["results"] for r in report["reports"])  # no check ran, so none passed
