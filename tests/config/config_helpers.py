"""Shared by the config tests: where the example project and the JSON Schema are, and schema validation."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "tiny_project"
SCHEMA = ROOT / "schema" / "torch-upgrade-check.schema.json"


def validate_against_schema(config_file: Path) -> None:
    """Validate a config file against the JSON Schema with jsonschema, else check-jsonschema, else skip."""
    if importlib.util.find_spec("jsonschema") is not None:
        import jsonschema

        jsonschema.validate(yaml.safe_load(config_file.read_text()), json.loads(SCHEMA.read_text()))
        return
    tool = shutil.which("check-jsonschema")
    if tool is None:
        pytest.skip("neither the jsonschema package nor the check-jsonschema command is installed here")
    proc = subprocess.run([tool, "--schemafile", str(SCHEMA), str(config_file)], capture_output=True, text=True,
                          check=False, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def find_tool(name: str) -> str | None:
    """A tool beside this interpreter (the venv's bin, where the test extra installs it, and where scripts/test.sh
    leaves it off PATH), else on PATH; the same rule as tests/action/act_harness.py."""
    beside = Path(sys.executable).parent / name
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which(name)
