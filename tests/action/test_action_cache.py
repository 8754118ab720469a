"""The action's venv inputs: `venv-cap` reaches the CLI, `cache` restores and saves the torch venvs through
GitHub's cache service under a key of what decides them; the pinned uv; fast, no act, no torch."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from act_harness import pinned_actions

from torch_upgrade_check import action_entry
from torch_upgrade_check.action import inputs as action_inputs
from torch_upgrade_check.action import steps as action_steps
from torch_upgrade_check.action.argv import plan
from torch_upgrade_check.action.inputs import env_name
from torch_upgrade_check.orchestrate import installer, store

ROOT = Path(__file__).resolve().parents[2]


def _env(**inputs: str) -> dict[str, str]:
    return {env_name(name.replace("_", "-")): value for name, value in inputs.items()}


def _values(**inputs: str) -> dict[str, str]:
    return action_inputs.read_inputs(_env(**inputs))


@pytest.fixture(scope="module")
def steps() -> dict[str, Any]:
    doc = yaml.safe_load((ROOT / "action.yml").read_text())
    return {s.get("id") or s["name"]: s for s in doc["runs"]["steps"]}


def test_venv_cap_reaches_the_cli() -> None:
    p = plan(_env(candidate_torch_version="2.13.0", venv_cap="50"))
    assert p.problems == () and p.argv[p.argv.index("--venv-cap") + 1] == "50"
    assert "--venv-cap" not in plan(_env(candidate_torch_version="2.13.0")).argv


@pytest.mark.parametrize(("inputs", "message"), [
    ({"candidate_torch_version": "2.13.0", "venv_cap": "0"}, "input 'venv-cap' must be a positive number of GB like 20, got '0'"),
    ({"candidate_torch_version": "2.13.0", "cache": "maybe"}, "input 'cache' must be true or false, got 'maybe'"),
    ({"cache": "true"}, "input 'cache' is used only to install torch; set 'candidate-torch-version'"),
    ({"venv_cap": "5"}, "input 'venv-cap' is used only to install torch; set 'candidate-torch-version'"),
])
def test_bad_venv_inputs_name_the_input_and_the_fix(inputs: dict[str, str], message: str) -> None:
    assert any(problem.startswith(message) for problem in plan(_env(**inputs)).problems), plan(_env(**inputs)).problems


KEY_ARGS = dict(python_version="3.11.7", system="linux", machine="x86_64", today="20260102")


def test_the_cache_key_follows_what_decides_the_venvs() -> None:
    base = action_steps.cache_key(_values(candidate_torch_version="2.13.0", baseline_torch_version="2.12.1"), **KEY_ARGS)
    assert base.startswith("torch-upgrade-check-venvs-v1-linux-x86_64-py3.11.7-") and not base.endswith("20260102")
    assert base == action_steps.cache_key(_values(candidate_torch_version="2.13.0", baseline_torch_version="2.12.1",
                                                  checks="mlp", rtol="1e-3"), **KEY_ARGS)  # checks do not matter
    for change in ({"torch_backend": "cu128"}, {"extra_requirements": "numpy"}, {"candidate_torch_version": "2.13.1"},
                   {"index_url": "https://mirror.example/simple"}):
        values = _values(**{"candidate_torch_version": "2.13.0", "baseline_torch_version": "2.12.1", **change})
        assert action_steps.cache_key(values, **KEY_ARGS) != base, change
    assert action_steps.cache_key(_values(candidate_torch_version="2.13.0", baseline_torch_version="2.12.1"),
                                  **{**KEY_ARGS, "python_version": "3.12.1"}) != base
    assert action_steps.cache_key(_values(candidate_torch_version="2.13.0", baseline_torch_version="2.12.1"),
                                  **{**KEY_ARGS, "machine": "aarch64"}) != base


@pytest.mark.parametrize("moving", ["nightly", "test", ">=2.13,<2.15"])
def test_a_moving_spec_is_cached_for_a_day(moving: str) -> None:
    assert action_steps.cache_key(_values(candidate_torch_version=moving), **KEY_ARGS).endswith("-20260102")


def test_the_cache_key_step_writes_enabled_key_and_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "github_output"
    environ = {**_env(candidate_torch_version="2.13.0", cache="true", python=sys.executable), "GITHUB_OUTPUT": str(output),
               "XDG_CACHE_HOME": str(tmp_path / "cache"), "RUNNER_ENVIRONMENT": "github-hosted"}
    assert action_entry.main(environ, ["cache-key"]) == 0
    text = output.read_text()
    outputs = {name: value for name, _, value in re.findall(r"^(\w[\w-]*)<<(\S+)\n(.*?)\n\2$", text, re.M | re.S)}
    assert outputs["enabled"] == "true"
    assert outputs["path"] == str(tmp_path / "cache" / "torch-upgrade-check" / "venvs") == \
        str(store.default_venv_dir(environ))
    assert outputs["key"].startswith("torch-upgrade-check-venvs-v1-")
    assert f"cache: key {outputs['key']}" in capsys.readouterr().out


def test_a_pull_requests_cache_is_its_own_store(tmp_path: Path) -> None:
    # compare builds a pull request's venvs under pull-requests/: caching the trusted store there restored
    # venvs it never used (a hit, so its own were never saved)
    base = {**_env(candidate_torch_version="2.13.0", cache="true", python=sys.executable),
            "XDG_CACHE_HOME": str(tmp_path / "cache"), "RUNNER_ENVIRONMENT": "github-hosted"}
    push = action_steps.cache_plan({**base, "GITHUB_EVENT_NAME": "push"})
    pr = action_steps.cache_plan({**base, "GITHUB_EVENT_NAME": "pull_request"})
    assert pr["path"] == str(store.store_root(store.default_venv_dir(base), {"GITHUB_EVENT_NAME": "pull_request"}))
    assert pr["path"] != push["path"] and pr["key"] == push["key"] + "-pr"


@pytest.mark.parametrize(("inputs", "extra", "said"), [
    ({"candidate_torch_version": "2.13.0"}, {}, ""),                                          # not asked for
    ({"candidate_torch_version": "2.13.0", "cache": "true"}, {"RUNNER_ENVIRONMENT": "self-hosted"}, "self-hosted"),
    ({"candidate_torch_version": "current", "cache": "true"}, {}, "nothing to install"),
    ({"candidate_torch_version": "banana", "cache": "true"}, {}, ""),                         # the check step reports it
    ({"candidate_torch_version": "2.13.0", "cache": "true", "python": "no/such/python"}, {}, ""),
])
def test_the_cache_is_off_when_it_cannot_help(inputs: dict[str, str], extra: dict[str, str], said: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    inputs = {"python": sys.executable, **inputs}
    assert action_steps.cache_plan({**_env(**inputs), **extra}) == {"enabled": "false", "key": "", "path": ""}
    assert said in capsys.readouterr().out


def test_the_action_restores_before_the_check_and_saves_after_it(steps: dict[str, Any]) -> None:
    order = list(steps)
    assert order.index("setup") < order.index("cache-key") < order.index("cache-restore") < order.index("check")
    restore, save = steps["cache-restore"], steps["Save the torch venvs to GitHub's cache"]
    assert restore["uses"].startswith("actions/cache/restore@") and save["uses"].startswith("actions/cache/save@")
    assert restore["uses"].split("@")[1] == save["uses"].split("@")[1]
    for step in (restore, save):
        assert step["with"] == {"path": "${{ steps.cache-key.outputs.path }}", "key": "${{ steps.cache-key.outputs.key }}"}
    assert restore["if"] == "steps.cache-key.outputs.enabled == 'true'"
    condition = " ".join(save["if"].split())
    for part in ("!cancelled()", "steps.cache-key.outputs.enabled == 'true'",
                 "steps.cache-restore.outputs.cache-hit != 'true'", "steps.check.outputs.verdict == 'passed'",
                 "steps.check.outputs.verdict == 'failed'"):
        assert part in condition
    assert "actions/cache" in pinned_actions(), "act maps actions/cache to its test double"
    assert (ROOT / "tests" / "action" / "act_stubs" / "cache" / "restore" / "action.yml").is_file()


def test_the_pinned_uv_is_the_one_the_tool_knows(steps: dict[str, Any]) -> None:
    assert steps["setup"]["env"]["UV_PINNED"] == f"uv=={installer.UV_VERSION}"
    assert '"$UV_PINNED"' in steps["setup"]["run"]
