"""Every renderer's output for each case matches its golden file (JUnit compared by parsing, not bytes)."""

from __future__ import annotations

import json
from typing import Any
from xml.etree import ElementTree as ET

import pytest
from report_cases import GOLDEN, GOLDEN_FILES, cases, render

REGEN = "PYTHONPATH=src python3 tests/report/regen_golden.py"
CASES = cases()


def _canonical_junit(text: str) -> Any:
    """Tags, attributes and trimmed text, with durations and timestamps set aside."""

    def walk(elem: ET.Element) -> Any:
        attrs = sorted((k, v) for k, v in elem.attrib.items() if k not in ("time", "timestamp", "hostname"))
        return elem.tag, attrs, (elem.text or "").strip(), [walk(child) for child in elem]

    return walk(ET.fromstring(text.encode("utf-8")))


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("filename", GOLDEN_FILES)
def test_matches_golden(case: str, filename: str) -> None:
    path = GOLDEN / case / filename
    assert path.exists(), f"{path} is missing: run {REGEN}"
    got, want = render(CASES[case])[filename], path.read_text(encoding="utf-8")
    if filename == "junit.xml":
        got, want = _canonical_junit(got), _canonical_junit(want)
    elif filename == "outputs.json":
        got, want = json.loads(got), json.loads(want)
    assert got == want, f"{path} differs from the renderer's output; if intended, run {REGEN} and review git diff"


def test_no_stale_golden_cases() -> None:
    assert sorted(p.name for p in GOLDEN.iterdir() if p.is_dir()) == sorted(CASES), f"run {REGEN}"
