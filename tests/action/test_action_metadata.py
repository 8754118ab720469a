"""action.yml, the reusable workflow and the examples keep their promises: inputs only through env:,
every input documented (in action.yml and the README), the workflow's inputs the action's, pinned actions."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from torch_upgrade_check.action import bisect as action_bisect
from torch_upgrade_check.action import inputs as action_inputs
from torch_upgrade_check.commands import init
from torch_upgrade_check.commands import merge as merge_command
from torch_upgrade_check.model import Report
from torch_upgrade_check.report.outputs import action_outputs, error_outputs

ROOT = Path(__file__).resolve().parents[2]
ACTION = ROOT / "action.yml"
REUSABLE = ROOT / ".github" / "workflows" / "torch-upgrade-check.yml"
WORKFLOW_ONLY_INPUTS = ("runners", "artifact-name", "summary-runner", "timeout-minutes")
NOT_MIRRORED = ("upload-report",)  # the reusable workflow uploads every runner's report itself
OUR_WORKFLOWS = sorted([*(ROOT / ".github" / "workflows").glob("*.yml"), *(ROOT / "workflows").glob("*.yml"),
                        *(ROOT / "tests" / "action" / "workflows").glob("*.yml")])
OUR_ACTIONS = sorted([ACTION, *(ROOT / "tests" / "action" / "act_stubs").rglob("action.yml")])
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
    assert tuple(action["inputs"]) == (*action_inputs.INPUTS, *action_inputs.ALIASES)
    (entry,) = [s for s in action["runs"]["steps"] if s.get("id") == "check"]
    assert entry["env"] == {action_inputs.env_name(n): f"${{{{ inputs.{n} }}}}" for n in action["inputs"]}
    assert "torch_upgrade_check.action_entry" in entry["run"]
    for name, spec in action["inputs"].items():
        assert action_inputs.DEFAULTS.get(name, "") == spec["default"], f"input {name!r}: default differs in action/inputs.py"


def test_outputs_are_exactly_what_the_cli_writes(action: dict[str, Any]) -> None:
    written = set(action_outputs([Report(tool_version="0", device="cpu", requested_device="cpu", label="",
                                        command=[], started="")],
                                 {"report": "", "junit": "", "summary": ""}))
    assert set(action["outputs"]) - set(action_bisect.BISECT_OUTPUTS) == written == set(error_outputs())
    assert set(action_bisect.BISECT_OUTPUTS) <= set(action["outputs"])
    for name, spec in action["outputs"].items():
        if name in action_bisect.BISECT_OUTPUTS:  # written only after a compare, by the check step
            assert spec["value"] == f"${{{{ steps.check.outputs.{name} }}}}"
            continue
        # the verdict and counts fall back to what the setup step writes when it stops the action (bad
        # `python` or `working-directory`, unsupported OS, failed install): verdict error, counts 0
        fallback = f" || steps.setup.outputs.{name}" if name not in ("report", "junit", "summary") else ""
        assert spec["value"] == f"${{{{ steps.check.outputs.{name}{fallback} }}}}"


@pytest.mark.parametrize(("env", "code", "title"), [
    ({"RUNNER_OS": "Windows"}, 2, "torch-upgrade-check%3A unsupported runner"),
    ({"INPUT_WORKING_DIRECTORY": "no/such/dir"}, 2, "torch-upgrade-check%3A input 'working-directory'"),
    ({"INPUT_PYTHON": "no-such-python%\n::warning::x"}, 2, "torch-upgrade-check%3A input 'python'"),
])
def test_the_setup_step_stops_with_an_annotation_and_error_outputs(action: dict[str, Any], tmp_path: Path,
                                                                   env: dict[str, str], code: int, title: str) -> None:
    (setup,) = [s for s in action["runs"]["steps"] if s.get("id") == "setup"]
    output = tmp_path / "github_output"
    base = {"PATH": os.environ["PATH"], "RUNNER_OS": "Linux", "RUNNER_TEMP": str(tmp_path), "GITHUB_OUTPUT": str(output),
            "GITHUB_ACTION_PATH": str(ROOT), "INPUT_PYTHON": "python3", "INPUT_WORKING_DIRECTORY": "."}
    proc = subprocess.run(["bash", "-c", setup["run"]], env={**base, **env}, cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == code, proc.stderr
    (annotation,) = proc.stdout.splitlines()  # one line: a newline in an input cannot start a command of its own
    assert annotation.startswith(f"::error title={title}::error: "), annotation
    assert proc.stderr.startswith("torch-upgrade-check: error: ")
    if "%" in env.get("INPUT_PYTHON", ""):
        assert "got 'no-such-python%25%0A::warning::x': not found" in annotation
    lines = dict(line.split("=", 1) for line in output.read_text().splitlines())
    assert lines == {k: v for k, v in error_outputs().items() if k not in ("report", "junit", "summary")}


def test_the_action_fails_fast_on_unsupported_runners_before_installing(action: dict[str, Any]) -> None:
    first = action["runs"]["steps"][0]["run"]
    assert "Linux|macOS" in first and "stop 2" in first
    assert first.index('case "${RUNNER_OS:-}"') < first.index('rm -rf -- "$venv"') < first.index("pip install")


def test_shell_stays_bash_32_and_bsd_compatible() -> None:
    for path in [*OUR_ACTIONS, *OUR_WORKFLOWS]:
        for step in steps(load(path)):
            for pattern in NOT_ON_MACOS:
                assert not re.search(pattern, step.get("run", "")), f"{path.name}: {step.get('name')!r} uses {pattern}"


def test_reusable_workflow_inputs_mirror_the_action(action: dict[str, Any], reusable: dict[str, Any]) -> None:
    inputs = on(reusable)["workflow_call"]["inputs"]
    fix = "run scripts/sync_workflow_inputs.py after editing action.yml's inputs"
    mirrored_names = [n for n in action["inputs"] if n not in NOT_MIRRORED]
    assert [n for n in inputs if n not in WORKFLOW_ONLY_INPUTS] == mirrored_names, fix
    for name in mirrored_names:
        spec = action["inputs"][name]
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
    per_runner = {"device", "python"}  # a `runners` entry may give its own (an object's keys), else the input's
    entry = "startsWith(toJSON(matrix.runner), '{') && matrix.runner"
    expected = {n: f"${{{{ {entry}.{n} || inputs.{n} }}}}" if n in per_runner else f"${{{{ inputs.{n} }}}}"
                for n in action["inputs"] if n != "upload-report"}
    assert step["with"] == {**expected, "upload-report": "false"}  # the workflow uploads each runner's report itself
    assert job["strategy"]["fail-fast"] is False


def test_reusable_workflow_survives_reruns_failures_and_hung_runners(reusable: dict[str, Any]) -> None:
    check, summary = reusable["jobs"]["check"], reusable["jobs"]["summary"]
    uploads = [s for job in (check, summary) for s in job["steps"] if s.get("uses", "").startswith("actions/upload-")]
    assert len(uploads) == 2 and all(s["with"]["overwrite"] is True for s in uploads)  # "Re-run failed jobs": no 409
    assert check["timeout-minutes"] == "${{ inputs.timeout-minutes }}" and isinstance(summary["timeout-minutes"], int)
    assert on(reusable)["workflow_call"]["inputs"]["timeout-minutes"]["default"] == 120
    # after a failure, not after a cancel: the status and report are uploaded, and the merge runs
    assert summary["if"] == "${{ !cancelled() }}"
    status_step, upload = check["steps"][-2:]
    assert status_step["if"] == upload["if"] == "${{ !cancelled() }}"
    assert "runner-status.json" in status_step["run"] and upload["with"]["path"] == "${{ runner.temp }}/torch-upgrade-check-upload"
    assert "always()" not in REUSABLE.read_text()
    ids = [s.get("id") for s in check["steps"]]
    assert [i for i in ids if i] == [sid for sid, _ in merge_command.STEPS], "merge.STEPS names the job's steps"
    for sid, _ in merge_command.STEPS:
        assert status_step["env"][sid.upper()] == f"${{{{ steps.{sid}.outcome }}}}"
    merge = next(s for s in summary["steps"] if s.get("id") == "merge")
    assert "--runner-status" in merge["run"] and '--runners "$RUNNERS"' in merge["run"]


def test_reusable_workflow_exports_the_actions_outputs(reusable: dict[str, Any], action: dict[str, Any]) -> None:
    outputs = on(reusable)["workflow_call"]["outputs"]
    # paths and a runner's own bisection do not merge over runners: they stay in each runner's summary and artifact
    assert list(outputs) == [n for n in action["outputs"]
                             if n not in ("report", "junit", "summary", *action_bisect.BISECT_OUTPUTS)]
    for name, spec in outputs.items():
        fallback = "'error'" if name == "verdict" else "'0'"  # no merge at all: say so, never ""
        assert spec["value"] == f"${{{{ jobs.summary.outputs.{name} || {fallback} }}}}"
        assert reusable["jobs"]["summary"]["outputs"][name] == f"${{{{ steps.merge.outputs.{name} }}}}"


def test_a_private_copy_of_the_action_can_be_checked_out(reusable: dict[str, Any]) -> None:
    secret = on(reusable)["workflow_call"]["secrets"]["action-token"]
    assert secret["required"] is False and "private" in secret["description"]
    for job in reusable["jobs"].values():
        (own,) = [s for s in job["steps"] if s.get("with", {}).get("path") == ".torch-upgrade-check-action"]
        assert own["with"]["token"] == "${{ secrets.action-token || github.token }}"
        assert own["with"]["persist-credentials"] is False


def test_the_callers_checkout_has_the_base_commit_for_the_baselines_stack(reusable: dict[str, Any]) -> None:
    # base-ref defaults to HEAD^1 (the base branch of a pull request's merge commit): the baseline's stack and its
    # auto pin are read there, so the calling repository must be checked out with its parent; so must the quick start
    quick_start = load(ROOT / "workflows" / "torch-upgrade-check.yml")
    for doc in (reusable, quick_start):
        checkouts = [s for s in steps(doc) if str(s.get("uses", "")).startswith("actions/checkout@")
                     and "repository" not in s.get("with", {})]
        assert checkouts and all(int(s["with"]["fetch-depth"]) >= 2 for s in checkouts), checkouts


def test_every_job_has_a_timeout() -> None:
    for path in OUR_WORKFLOWS:
        for name, job in load(path)["jobs"].items():
            assert "uses" in job or "timeout-minutes" in job, f"{path.name}: job {name!r} needs timeout-minutes"


# The only write permissions anywhere: the comment example writes its comment; the release job its release and tag;
# the canary's publish job pushes its history branch.
WRITES = {("pr-comment.yml", "comment"): {"pull-requests"}, ("release.yml", "release"): {"contents"},
          ("torch-canary.yml", "publish"): {"contents"}}


def test_permissions_are_empty_at_the_top_and_granted_per_job() -> None:
    for path in OUR_WORKFLOWS:
        doc = load(path)
        assert doc.get("permissions") == {}, f"{path.name}: start from `permissions: {{}}`"
        assert "pull_request_target" not in on(doc), f"{path.name}: never pull_request_target"
        for name, job in doc["jobs"].items():
            assert "permissions" in job, f"{path.name}: job {name!r} must say which permissions it needs"
            writes = {k for k, v in (job["permissions"] or {}).items() if v not in ("read", "none")}
            assert writes == WRITES.get((path.name, name), set()), (path.name, name, writes)


def test_release_runs_only_on_v1_tags_and_moves_v1() -> None:
    release = load(ROOT / ".github" / "workflows" / "release.yml")
    assert on(release) == {"push": {"tags": ["v1.*.*"]}}
    (job,) = release["jobs"].values()
    assert job["permissions"] == {"contents": "write"}
    text = "\n".join(s.get("run", "") for s in job["steps"])
    assert "refs/tags/v1" in text and "gh release create" in text and "pyproject.toml" in text and "CHANGELOG.md" in text
    assert all("GH_TOKEN" not in s.get("env", {}) for s in job["steps"] if "gh " not in s.get("run", ""))


def test_examples_pin_this_workflow_by_sha_with_its_version() -> None:
    for path in sorted((ROOT / "workflows").glob("*.yml")):
        for m in re.finditer(r"uses:\s*(OWNER/torch-upgrade-check\S*)(.*)", path.read_text()):
            assert SHA_PIN.match(m.group(1)) and re.search(r"#\s*v1\.\d+\.\d+", m.group(2)), (path.name, m.group(0))


def test_the_license_and_changelog_ship() -> None:
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    assert 'license = { text = "MIT" }' in (ROOT / "pyproject.toml").read_text()
    assert re.search(r"^## \[1\.0\.0\]", (ROOT / "CHANGELOG.md").read_text(), re.MULTILINE)


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
    assert not missing, f"README.md has no table row for {missing}: add one to its Inputs or Outputs table, as action.yml says it"


def test_the_init_template_uses_only_inputs_the_action_has(action: dict[str, Any]) -> None:
    template = yaml.safe_load(init.templates()[init.WORKFLOW_PATH])
    uses = [s for s in steps(template) if str(s.get("uses", "")).startswith("OWNER/torch-upgrade-check")]
    assert uses, "the init template no longer calls the action"
    for step in uses:
        unknown = sorted(set(step.get("with", {})) - set(action["inputs"]))
        assert not unknown, f"`torch-upgrade-check init` writes inputs the action does not have: {unknown}"


@pytest.mark.parametrize(("tag", "changelog_head", "code", "says"), [
    ("v1.0.0", None, 0, ""),
    ("v1.0.1", None, 1, "pyproject.toml says version '1.0.0'"),
    ("v1.0.0", "## [1.0.0] - unreleased", 1, "has no date"),
    ("1.0.0", None, 1, "is not v1.MINOR.PATCH"),
])
def test_the_release_check_accepts_this_release_and_refuses_what_is_not_ready(
        tmp_path: Path, tag: str, changelog_head: str | None, code: int, says: str) -> None:
    release = load(ROOT / ".github" / "workflows" / "release.yml")
    (job,) = release["jobs"].values()
    (check,) = [s for s in job["steps"] if "CHANGELOG.md" in s.get("run", "")]
    work = tmp_path / "repo"
    work.mkdir()
    (work / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    changelog = (ROOT / "CHANGELOG.md").read_text()
    if changelog_head:
        changelog = re.sub(r"^## \[1\.0\.0\].*$", changelog_head, changelog, count=1, flags=re.MULTILINE)
    (work / "CHANGELOG.md").write_text(changelog)
    proc = subprocess.run(["bash", "-c", check["run"]], cwd=work, env={"PATH": os.environ["PATH"], "TAG": tag,
                          "RUNNER_TEMP": str(tmp_path)}, capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode == code, proc.stderr
    assert says in proc.stderr
    if code == 0:
        assert "The first release" in (tmp_path / "notes.md").read_text()
    from torch_upgrade_check import __version__
    assert f'version = "{__version__}"' in (ROOT / "pyproject.toml").read_text()
