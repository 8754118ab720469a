"""Shared fixtures: the interpreter under test is this one (the test setup installs torch into it)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def has_torch() -> bool:
    return importlib.util.find_spec("torch") is not None


requires_torch = pytest.mark.skipif(not has_torch(), reason="torch is not installed in this interpreter")


# Modules whose module-scoped fixtures build venvs: under pytest-xdist (scripts/test.sh) their tests stay on one
# worker, so each venv is built once. The act tests share one worker too: act's own caches are not safe to share.
ONE_WORKER_MODULES = ("test_abi.py", "test_imports.py", "test_stack_sides.py", "test_real_repositories.py")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the xdist_group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark `e2e` every test that starts a torch worker: each asks for `torch_python` (as an argument or through
    `pytest.mark.usefixtures`), which is how a test gets the interpreter it starts workers with. The developer
    loop `-m "not e2e and not slow and not act"` then runs in seconds. Every such torch-free test is also in the
    fast tier (`-m fast`), with the few e2e tests marked `fast` by hand."""
    for item in items:
        if "torch_python" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.e2e)
        if not any(item.get_closest_marker(m) for m in ("e2e", "slow", "act")):
            item.add_marker(pytest.mark.fast)  # torch-free: the fast tier has all of these
        if item.get_closest_marker("act"):
            item.add_marker(pytest.mark.xdist_group("act"))
        elif item.path.name in ONE_WORKER_MODULES:
            item.add_marker(pytest.mark.xdist_group(item.path.stem))


@pytest.fixture(scope="session")
def torch_python() -> str:
    if not has_torch():
        pytest.fail("the tests need torch in the test interpreter: run the README's test command")
    return sys.executable


def run_cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
            timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """The real console entry point, in a subprocess, as a user runs it."""
    return subprocess.run(  # noqa: PLW1510 - callers assert on returncode
        [sys.executable, "-m", "torch_upgrade_check", *args],
        capture_output=True, text=True, cwd=cwd, timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def load_report(out: Path) -> dict:
    return json.loads((out / "report.json").read_text())


def results_by_id(report: dict) -> dict[str, dict]:
    return {r["id"]: r for r in report["results"]}


def user_project(folder: Path, modules: dict[str, str], config: str) -> None:
    """`folder` as a team's checkout: Python modules (name -> source) and a torch-upgrade-check.yml with no built-ins,
    the folder on the worker's path, and `config` (YAML, top-level keys) after that."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, source in modules.items():
        (folder / f"{name}.py").write_text(source)
    (folder / "torch-upgrade-check.yml").write_text("version: 1\nsuite: none\npython-path: [.]\n" + config)
