"""The user's pytest run with the interpreter under test: real pytest processes, real JUnit, every failure mode."""

from __future__ import annotations

import shutil
import sys
import time
import venv
from pathlib import Path
from typing import Any

import pytest
from config_helpers import EXAMPLE

from torch_upgrade_check.hostchecks.pytest_passthrough import node_id, run_pytest
from torch_upgrade_check.model import CheckResult, Outcome, check_id

pytestmark = pytest.mark.usefixtures("torch_python")

EXTRA_TESTS = '''
import pytest

def test_fails():
    assert 1 + 1 == 3, "arithmetic changed"

@pytest.mark.skip(reason="needs a GPU")
def test_skipped():
    pass

@pytest.fixture
def broken():
    raise RuntimeError("fixture exploded")

def test_setup_error(broken):
    pass

class TestGroup:
    @pytest.mark.parametrize("n", [1, 2])
    def test_param(self, n):
        assert n == 1
'''


def _run(cwd: Path, args: list[str], out: Path, **kw: Any) -> dict[str, CheckResult]:
    results = run_pytest(sys.executable, args, cwd=cwd, out_dir=out, timeout_s=kw.pop("timeout_s", 300), **kw)
    return {r.id: r for r in results}


def _copy_example(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    return project


@pytest.mark.fast  # in the fast tier: one of the few e2e tests that together run every module
def test_example_project_passes(tmp_path: Path) -> None:
    out = tmp_path / "out"
    had_cache = (EXAMPLE / ".pytest_cache").exists()
    by_id = _run(EXAMPLE, ["tests/", "-q"], out, device="cpu")
    assert by_id.pop("pytest[-]/warnings").outcome is Outcome.PASSED
    assert sorted(by_id) == [
        "tests/test_models.py::test_classifier_gives_finite_logits[-]/pytest",
        "tests/test_models.py::test_classifier_learns[-]/pytest",
        "tests/test_models.py::test_encoder_is_deterministic_in_eval[-]/pytest",
    ]
    for r in by_id.values():
        assert (r.outcome, r.reason, r.aspect, r.dtype, r.device) == (Outcome.PASSED, "passed", "pytest", "-", "cpu")
        assert r.duration_s >= 0 and r.repro.endswith(f"-m pytest {r.workload}")
    assert (out / "pytest-junit.xml").exists() and "3 passed" in (out / "pytest.log").read_text()
    assert (EXAMPLE / ".pytest_cache").exists() == had_cache  # -p no:cacheprovider: nothing left in the checkout


def test_failures_skips_and_errors_are_each_reported(tmp_path: Path) -> None:
    project = _copy_example(tmp_path)
    (project / "tests" / "test_extra.py").write_text(EXTRA_TESTS)
    by_id = _run(project, ["tests/"], tmp_path / "out")

    def get(test: str) -> CheckResult:
        return by_id[check_id(f"tests/test_extra.py::{test}", "-", "pytest")]

    assert len(by_id) == 3 + 5 + 1  # and pytest[-]/warnings
    assert all(r.outcome is Outcome.PASSED for k, r in by_id.items() if "test_models" in k)
    fails = get("test_fails")
    assert fails.outcome is Outcome.FAILED and fails.reason == "AssertionError: arithmetic changed assert (1 + 1) == 3"
    assert "tests/test_extra.py:5: AssertionError" in fails.details
    assert (get("test_skipped").outcome, get("test_skipped").reason) == (Outcome.SKIPPED, "needs a GPU")
    error = get("test_setup_error")
    assert error.outcome is Outcome.ERROR and error.reason == 'failed on setup with "RuntimeError: fixture exploded"'
    assert get("TestGroup::test_param[1]").outcome is Outcome.PASSED
    assert get("TestGroup::test_param[2]").outcome is Outcome.FAILED
    assert "'tests/test_extra.py::TestGroup::test_param[2]'" in get("TestGroup::test_param[2]").repro


def test_collection_error_names_the_file(tmp_path: Path) -> None:
    project = _copy_example(tmp_path)
    (project / "tests" / "test_broken.py").write_text("import no_such_module_here\n")
    by_id = _run(project, ["tests/"], tmp_path / "out")
    r = by_id["tests/test_broken.py[-]/pytest"]
    assert r.outcome is Outcome.ERROR
    assert r.reason == "collection failure: E   ModuleNotFoundError: No module named 'no_such_module_here'"
    assert sorted(by_id) == ["pytest[-]/warnings", "tests/test_broken.py[-]/pytest"]  # pytest stops at collection errors


def test_python_path_reaches_the_tests(tmp_path: Path) -> None:
    (tmp_path / "src" / "mypkg").mkdir(parents=True)
    (tmp_path / "src" / "mypkg" / "__init__.py").write_text("VALUE = 42\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_it.py").write_text(
        "import os, mypkg\n\ndef test_it():\n    assert mypkg.VALUE == 42\n"
        "    assert os.environ['TORCH_UPGRADE_CHECK_DEVICE'] == 'mps'\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    by_id = _run(tmp_path, ["tests"], tmp_path / "out", python_path=[str(tmp_path / "src")], device="mps")
    assert [(k, r.outcome) for k, r in by_id.items()] == [("tests/test_it.py::test_it[-]/pytest", Outcome.PASSED),
                                                          ("pytest[-]/warnings", Outcome.PASSED)]


def test_the_warnings_the_tests_raise_are_one_result_with_their_tests(tmp_path: Path) -> None:
    """What the user's own tests see warned under this torch: compare judges it as a workload's warnings."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_warns.py").write_text(
        "import warnings\n\n"
        "def old_api():\n    warnings.warn('old_api is deprecated at 0x7f00deadbeef', FutureWarning, stacklevel=2)\n\n"
        "def test_a():\n    old_api()\n    old_api()\n\n"
        "def test_b():\n    old_api()\n\n"
        "def test_quiet():\n    pass\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    by_id = _run(tmp_path, ["tests"], tmp_path / "out")
    r = by_id["pytest[-]/warnings"]
    assert r.outcome is Outcome.PASSED and r.reason.startswith("1 warning (FutureWarning); first: FutureWarning from ")
    [w] = [w for w in r.metrics["warnings"] if w["category"] == "FutureWarning"]
    assert w["message"] == "old_api is deprecated at 0x…" and w["module"].endswith("test_warns")
    assert w["count"] == 3 and w["aspects"] == ["tests/test_warns.py::test_a", "tests/test_warns.py::test_b"]


def _session(by_id: dict[str, CheckResult]) -> CheckResult:
    assert list(by_id) == ["pytest[-]/pytest"]
    return by_id["pytest[-]/pytest"]


def test_timeout_kills_pytest_and_is_one_error(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_hang.py").write_text("import time\n\ndef test_hang():\n    time.sleep(600)\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    started = time.monotonic()
    r = _session(_run(tmp_path, ["tests", "-v"], tmp_path / "out", timeout_s=5))
    assert time.monotonic() - started < 60
    assert r.outcome is Outcome.ERROR
    assert r.reason == ("pytest did not finish within 5s and was stopped; no test results were kept "
                        "(raise the timeout or narrow pytest.args)")
    assert "test_hang" in r.details  # the output's tail: pytest -v had named the test it was running


def test_pytest_missing_from_the_interpreter(tmp_path: Path) -> None:
    venv.create(tmp_path / "bare", with_pip=False)
    python = str(tmp_path / "bare" / "bin" / "python")
    r = _session({x.id: x for x in run_pytest(python, ["tests/"], cwd=EXAMPLE, out_dir=tmp_path / "out", timeout_s=120)})
    assert r.outcome is Outcome.ERROR
    assert r.reason == (f"pytest is not installed in {python}; install it there (pip install pytest) "
                        f"or remove the pytest section from the config")
    assert "No module named pytest" in r.details


def test_missing_interpreter_and_folder(tmp_path: Path) -> None:
    r = _session({x.id: x for x in run_pytest("/nonexistent/python", [], cwd=EXAMPLE, out_dir=tmp_path, timeout_s=9)})
    assert r.reason == ("cannot start /nonexistent/python: No such file or directory; pytest runs with the Python "
                        "whose torch is tested")
    r = _session({x.id: x for x in run_pytest(sys.executable, [], cwd=tmp_path / "nope", out_dir=tmp_path, timeout_s=9)})
    assert r.reason == f"cannot run pytest in {tmp_path / 'nope'}: no such folder"


@pytest.mark.parametrize(("args", "reason"), [
    (["tests/", "-k", "no_such_test"], "pytest ran no test with args tests/ -k no_such_test (exit code 5, no tests "
                                       "collected); check the paths and -k/-m expressions"),
    (["tests/nope.py"], "pytest ran no test with args tests/nope.py (exit code 4, usage error); "
                        "ERROR: file or directory not found: tests/nope.py"),
    (["--no-such-flag"], "pytest wrote no JUnit file (exit code 4, usage error); "
                         "python -m pytest: error: unrecognized arguments: --no-such-flag"),
])
def test_empty_or_bad_selection_is_one_error(tmp_path: Path, args: list[str], reason: str) -> None:
    r = _session(_run(EXAMPLE, args, tmp_path / "out"))
    assert (r.outcome, r.reason) == (Outcome.ERROR, reason)


@pytest.mark.parametrize(("classname", "name", "file", "expected"), [
    ("tests.test_x", "test_a", "tests/test_x.py", "tests/test_x.py::test_a"),
    ("tests.test_x.TestA.TestB", "test_b[1-2]", "tests/test_x.py", "tests/test_x.py::TestA::TestB::test_b[1-2]"),
    ("my.pkg.tests.test_x", "test_a", "my.pkg/tests/test_x.py", "my.pkg/tests/test_x.py::test_a"),  # dotted folder
    ("", "tests.test_broken", "tests/test_broken.py", "tests/test_broken.py"),  # collection error
    ("tests.test_x.TestA", "test_b", None, "tests/test_x.py::TestA::test_b"),  # xunit2: no file attribute
    ("", "tests.test_broken", None, "tests/test_broken.py"),
])
def test_node_id(classname: str, name: str, file: str | None, expected: str) -> None:
    assert node_id(classname, name, file) == expected
