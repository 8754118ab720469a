"""action.yml, the reusable workflow and the examples keep their promises: inputs only through env:,
every input documented (in action.yml and the README), the workflow's inputs the action's, pinned actions."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from torch_upgrade_check import action_entry
from torch_upgrade_check.model import Report
from torch_upgrade_check.report.outputs import action_outputs

ROOT = Path(__file__).resolve().parents[2]
ACTION = ROOT / "action.yml"
REUSABLE = ROOT / ".github" / "workflows" / "torch-upgrade-check.yml"
WORKFLOW_ONLY_INPUTS = ("runners", "artifact-name", "summary-runner")
OUR_WORKFLOWS = sorted([*(ROOT / ".github" / "workflows").glob("*.yml"), *(ROOT / "workflows").glob("*.yml"),
                        *(ROOT / "tests" / "action" / "workflows").glob("*.yml")])
OUR_ACTIONS = sorted([ACTION, *(ROOT / "tests" / "action" / "act_stubs").glob("*/action.yml")])
SHA_PIN = re.compile(r"^[\w.-]+/[\w.-]+(/[\w./-]+)?@[0-9a-f]{40}$")
# GNU-only or bash-4 features that break on macOS runners (bash 3.2, BSD userland)
NOT_ON_MACOS = [r"\btimeout\s", r"\breadarray\b", r"\bmapfile\b", r"declare -A", r"\$\{\w+,,", r"\$\{\w+\^\^",
                r"\|&", r"&>>", r"\bsed -i\b", r"\bgrep -P\b", r"\breadlink -f\b", r"\bdate -d\b", r"\bstat -c\b",
                r"\bxargs -r\b", r"\bfind\b.*-printf"]


def load(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())


def on(workflow: dict[str, Any]) -> dict[str, Any]:
    return workflow.get("on", workflow.get(True)) or {}  # YAML 1.1 reads a bare `on` as True


def steps(doc: dict[str, Any]) -> Iterator[dict[str, Any]]:
    if "runs" in doc:
        yield from doc["runs"].get("steps", [])
    for job in doc.get("jobs", {}).values():
        yield from job.get("steps", [])


@pytest.fixture(scope="module")
def action() -> dict[str, Any]:
    return load(ACTION)


@pytest.fixture(scope="module")
def reusable() -> dict[str, Any]:
    return load(REUSABLE)


def test_every_input_is_documented_with_its_default_and_an_example(action: dict[str, Any]) -> None:
    for name, spec in action["inputs"].items():
        assert re.fullmatch(r"[a-z]+(-[a-z]+)*", name), f"input {name!r} is not kebab-case"
        text = " ".join(spec["description"].split())
        assert "Default:" in text and "Example:" in text, f"input {name!r}: say its default and give an example"
        assert spec.get("required", False) is False and isinstance(spec["default"], str), name
    for name, spec in action["outputs"].items():
        assert "Example:" in spec["description"], f"output {name!r}: give an example"


def test_inputs_reach_the_shell_only_through_env(action: dict[str, Any]) -> None:
    for path in [*OUR_ACTIONS, *OUR_WORKFLOWS]:
        for step in steps(load(path)):
            if "run" in step:
                assert "${{" not in step["run"], f"{path.name}: step {step.get('name')!r} puts an expression in run:"
                assert step.get("shell") == "bash", f"{path.name}: step {step.get('name')!r} needs shell: bash"


def test_the_entry_step_gets_every_input_under_its_env_name(action: dict[str, Any]) -> None:
    assert tuple(action["inputs"]) == action_entry.INPUTS
    (entry,) = [s for s in action["runs"]["steps"] if s.get("id") == "check"]
    assert entry["env"] == {action_entry.env_name(n): f"${{{{ inputs.{n} }}}}" for n in action["inputs"]}
    assert "torch_upgrade_check.action_entry" in entry["run"]
    for name, spec in action["inputs"].items():
        assert action_entry.DEFAULTS.get(name, "") == spec["default"], f"input {name!r}: default differs in action_entry"


def test_outputs_are_exactly_what_the_cli_writes(action: dict[str, Any]) -> None:
    written = set(action_outputs([Report(tool_version="0", device="cpu", requested_device="cpu", label="",
                                        command=[], started="")],
                                 {"report": "", "junit": "", "summary": ""}))
    assert set(action["outputs"]) == written
    for name, spec in action["outputs"].items():
        assert spec["value"] == f"${{{{ steps.check.outputs.{name} }}}}"


def test_the_action_fails_fast_on_unsupported_runners_before_installing(action: dict[str, Any]) -> None:
    first = action["runs"]["steps"][0]["run"]
    assert "RUNNER_OS" in first and "Linux|macOS" in first and "exit 2" in first


def test_shell_stays_bash_32_and_bsd_compatible() -> None:
    for path in [*OUR_ACTIONS, *OUR_WORKFLOWS]:
        for step in steps(load(path)):
            for pattern in NOT_ON_MACOS:
                assert not re.search(pattern, step.get("run", "")), f"{path.name}: {step.get('name')!r} uses {pattern}"


def test_reusable_workflow_inputs_mirror_the_action(action: dict[str, Any], reusable: dict[str, Any]) -> None:
    inputs = on(reusable)["workflow_call"]["inputs"]
    fix = "run scripts/sync_workflow_inputs.py after editing action.yml's inputs"
    assert [n for n in inputs if n not in WORKFLOW_ONLY_INPUTS] == list(action["inputs"]), fix
    for name, spec in action["inputs"].items():
        mirrored = inputs[name]
        assert mirrored["type"] == "string" and mirrored["default"] == spec["default"], f"{name}: {fix}"
        assert " ".join(mirrored["description"].split()) == " ".join(spec["description"].split()), f"{name}: {fix}"
    for name in WORKFLOW_ONLY_INPUTS:
        assert "Default:" in inputs[name]["description"] and "Example:" in inputs[name]["description"]


def test_reusable_workflow_passes_every_input_to_the_action_it_checked_out(reusable: dict[str, Any],
                                                                            action: dict[str, Any]) -> None:
    job = reusable["jobs"]["check"]
    (checkout,) = [s for s in job["steps"] if s.get("with", {}).get("path") == ".torch-upgrade-check-action"]
    assert checkout["with"]["repository"] == "${{ job.workflow_repository }}"
    assert checkout["with"]["ref"] == "${{ job.workflow_sha }}"
    (step,) = [s for s in job["steps"] if s.get("uses") == "./.torch-upgrade-check-action"]
    assert step["with"] == {n: f"${{{{ inputs.{n} }}}}" for n in action["inputs"]}
    assert job["strategy"]["fail-fast"] is False
    assert reusable["jobs"]["summary"]["if"] == "always()"


def test_permissions_are_empty_at_the_top_and_granted_per_job() -> None:
    for path in OUR_WORKFLOWS:
        doc = load(path)
        assert doc.get("permissions") == {}, f"{path.name}: start from `permissions: {{}}`"
        assert "pull_request_target" not in on(doc), f"{path.name}: never pull_request_target"
        for name, job in doc["jobs"].items():
            assert "permissions" in job, f"{path.name}: job {name!r} must say which permissions it needs"
            granted = job["permissions"] or {}
            assert all(v in ("read", "none") for k, v in granted.items() if k != "pull-requests"), (path.name, name)


def test_third_party_actions_are_pinned_by_full_sha_with_the_version_beside() -> None:
    pins: dict[str, set[str]] = {}
    for path in [*OUR_ACTIONS, *OUR_WORKFLOWS]:
        for line in path.read_text().splitlines():
            m = re.match(r"\s*(?:-\s*)?uses:\s*(\S+)(.*)$", line)
            if not m or m.group(1).startswith("./") or m.group(1).startswith("OWNER/torch-upgrade-check"):
                continue
            assert SHA_PIN.match(m.group(1)), f"{path.name}: {m.group(1)} is not pinned by a full commit SHA"
            assert re.search(r"#\s*v\d+(\.\d+)*", m.group(2)), f"{path.name}: say the version beside {m.group(1)}"
            action, sha = m.group(1).split("@")
            pins.setdefault(action, set()).add(sha)
    assert pins and all(len(shas) == 1 for shas in pins.values()), f"one SHA per action everywhere: {pins}"


def test_every_input_and_output_is_in_the_readme(action: dict[str, Any]) -> None:
    readme = (ROOT / "README.md").read_text()
    rows = {m.group(1) for m in re.finditer(r"^\|\s*`([a-z-]+)`\s*\|", readme, re.MULTILINE)}
    missing = [n for n in [*action["inputs"], *action["outputs"], *WORKFLOW_ONLY_INPUTS] if n not in rows]
    assert not missing, f"README.md has no table row for {missing}; see docs/action-readme-section.md"


def test_the_init_template_uses_only_inputs_the_action_has(action: dict[str, Any]) -> None:
    from torch_upgrade_check import scaffold

    template = yaml.safe_load(scaffold.templates()[scaffold.WORKFLOW_PATH])
    uses = [s for s in steps(template) if str(s.get("uses", "")).startswith("OWNER/torch-upgrade-check")]
    assert uses, "the init template no longer calls the action"
    for step in uses:
        unknown = sorted(set(step.get("with", {})) - set(action["inputs"]))
        assert not unknown, f"`torch-upgrade-check init` writes inputs the action does not have: {unknown}"
