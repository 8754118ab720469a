"""The reference tables of the README and docs/configuration.md are generated from their sources, and the README's
quick start is the one starting point: the same workflow as workflows/torch-upgrade-check.yml and what
`torch-upgrade-check init` writes."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from torch_upgrade_check.commands import init
from torch_upgrade_check.model import ASPECTS, FAIL_ON, CheckResult, Outcome

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "docs_tables.py"
CONFIGURATION = ROOT / "docs" / "configuration.md"
USES = re.compile(r"(uses: OWNER/torch-upgrade-check)@\S+(\s+#.*)?")


def _load(name: str):  # noqa: ANN202 - a module object
    """scripts/NAME.py as a module."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_docs_tables_are_what_the_script_generates_from_their_sources() -> None:
    docs_tables = _load("docs_tables")
    for page in docs_tables.PAGES:
        text = page.read_text()
        assert docs_tables.render(text, page) == text, f"{page.name} is stale: run python3 scripts/docs_tables.py"
    assert "<!-- config keys: generated" in CONFIGURATION.read_text()  # the config file's reference holds its keys
    proc = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


def test_the_check_mode_fails_on_a_drifted_readme(tmp_path: Path) -> None:
    docs_tables = _load("docs_tables")
    readme = (ROOT / "README.md").read_text()
    drifted = readme.replace("| `device` | no | `auto` |", "| `device` | no | `cpu` |", 1)
    assert drifted != readme
    assert docs_tables.render(drifted) == readme  # the script puts the source's row back
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    rows = docs_tables.inputs_table(action["inputs"])
    assert len(rows) == 2 + len(action["inputs"]) and all(f"| `{n}` |" in readme for n in action["inputs"])
    config = CONFIGURATION.read_text()
    drifted = config.replace("| `threads` | integer |", "| `threads` | number |", 1)
    assert drifted != config and docs_tables.render(drifted, CONFIGURATION) == config


def test_every_input_states_its_default_in_the_table() -> None:
    docs_tables = _load("docs_tables")
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    for name, spec in action["inputs"].items():
        _, default, _ = docs_tables.split_description(spec["description"])
        if spec["default"]:
            assert default.startswith(f"`{spec['default']}`"), (name, default)
        else:
            assert default.startswith("not set: "), (name, default)


def _normalised(text: str) -> str:
    return USES.sub(r"\1@REF", text).strip()


def test_readme_init_and_workflows_share_one_starting_point() -> None:
    readme = (ROOT / "README.md").read_text()
    first_yaml = re.search(r"```yaml\n(.*?)```", readme, re.DOTALL)
    assert first_yaml and readme[: first_yaml.end()].count("\n") < 60, "the quick start must end within 60 lines"
    quick_start = first_yaml.group(1)
    example = (ROOT / "workflows" / "torch-upgrade-check.yml").read_text()
    written = init.templates()[init.WORKFLOW_PATH]
    assert _normalised(quick_start) == _normalised(example) == _normalised(written)
    workflow = yaml.safe_load(example)
    assert workflow.get("on", workflow.get(True)) and workflow["jobs"], "a complete workflow: on: and a job"
    (step,) = [s for s in workflow["jobs"]["torch"]["steps"] if "OWNER/torch-upgrade-check" in s.get("uses", "")]
    assert step["with"]["upload-report"] is True
    assert "macos" not in example.lower()  # hosted macOS runners have no usable MPS


def test_the_readme_says_which_fail_on_kind_counts_each_aspect() -> None:
    # the exit-code section's list of what counts as correctness is generated from model.FAIL_KINDS: a new
    # aspect, or one moved to another kind, lands in the right row (a hand-kept list had missed ten)
    readme = (ROOT / "README.md").read_text()
    block = readme[readme.index("<!-- fail-on kinds: generated"):readme.index("<!-- end of fail-on kinds -->")]
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `([a-z]+)` \| (.*) \|$", block, re.MULTILINE)}
    assert list(rows) == list(FAIL_ON)
    for aspect in ASPECTS:
        kind = CheckResult("w", aspect, "cpu", "float32", Outcome.FAILED).fail_kind
        assert [k for k, text in rows.items() if f"`{aspect}`" in text] == [kind], aspect


def test_sync_workflow_inputs_has_a_check_mode_and_puts_a_drifted_input_back(tmp_path: Path) -> None:
    sync = _load("sync_workflow_inputs")
    workflow, action = sync.REUSABLE.read_text(), sync.ACTION.read_text()
    assert sync.render(workflow, action) == workflow  # current
    drifted = workflow.replace("default: auto\n", "default: cpu\n", 1)
    assert drifted != workflow and sync.render(drifted, action) == workflow
    for script in ("sync_workflow_inputs", "docs_tables"):  # both commands, --check on the current tree
        proc = subprocess.run([sys.executable, str(ROOT / "scripts" / f"{script}.py"), "--check"], capture_output=True,
                              text=True, check=False, timeout=60)
        assert proc.returncode == 0, proc.stderr
    # the shared writer: --check says stale (exit 1) and writes nothing; without it, it writes
    blocks = _load("generated_blocks")
    stale = tmp_path / "file.yml"
    stale.write_text("old\n")
    assert blocks.write_or_check(stale, "new\n", ["--check"], "sync_workflow_inputs") == 1
    assert stale.read_text() == "old\n"
    assert blocks.write_or_check(stale, "new\n", [], "sync_workflow_inputs") == 0 and stale.read_text() == "new\n"
    with pytest.raises(ValueError, match="lacks its marker lines"):
        sync.render(workflow.replace(sync.BEGIN, ""), action)
