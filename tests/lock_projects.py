"""Teams' projects locked by the real tools (uv, poetry) in a git repository made in the test: `main` locks torch
2.13.0, the branch `bump` changes only the lock, to 2.14.1 (the pull request Renovate and Dependabot open). Used by
tests/test_locks.py (settings) and tests/test_real_repositories.py (the whole compare)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from team_repo import git

from torch_upgrade_check.stack import tomllib  # tomli before Python 3.11

PYPROJECT = """\
[project]
name = "team-app"
version = "0.1.0"
requires-python = ">=3.10"
dependencies = ["{torch}", "requests"]
"""

# poetry 2 asks for a package section only to install the project itself; locking reads [project]
POETRY_NO_PACKAGE = '\n[tool.poetry]\npackage-mode = false\n'


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


def uv_bump(repo: Path) -> Path:
    """pyproject `torch>=2.12`, `uv lock` at 2.13.0 on main; `bump` moves uv.lock (and pylock.toml as `uv export
    --format pylock.toml` writes it) to 2.14.1, pyproject untouched."""
    repo.mkdir(parents=True)
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


def poetry_bump(repo: Path) -> Path:
    """pyproject `torch>=2.12`, `poetry lock` at 2.13.0 on main; `bump` moves poetry.lock alone to 2.14.1. poetry has no
    `--upgrade-package torch==X`: each lock is made with torch held at X in the project, then locked again with the
    committed `torch>=2.12` (poetry lock keeps what is locked), so the lock's content-hash is the committed project's."""
    repo.mkdir(parents=True)
    poetry = tool("poetry")
    git(repo, "init", "-q")
    project = repo / "pyproject.toml"
    for branch, version in (("main", "2.13.0"), ("bump", "2.14.1")):
        if branch != "main":
            git(repo, "checkout", "-qb", branch)
        project.write_text(PYPROJECT.format(torch=f"torch=={version}") + POETRY_NO_PACKAGE)
        run(repo, poetry, "lock", timeout=600)
        project.write_text(PYPROJECT.format(torch="torch>=2.12") + POETRY_NO_PACKAGE)
        run(repo, poetry, "lock", timeout=600)
        git(repo, "add", ".")
        git(repo, "commit", "-qm", f"lock torch {version}")
    assert git(repo, "diff", "--name-only", "main", "bump").split() == ["poetry.lock"]
    return repo


def locked_version(lock: Path, name: str) -> str:
    """The version a uv.lock or poetry.lock pins for `name` (both list `[[package]]` tables)."""
    found = [p["version"] for p in tomllib.loads(lock.read_text())["package"] if p["name"] == name]
    assert len(found) == 1, found
    return found[0]
