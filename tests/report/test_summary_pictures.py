"""The README's pictures of a summary show the current golden files: each records the hash of the summary.md it
was rendered from (scripts/render_summary_pictures.sh), and a golden file that changed since needs a new picture."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PICTURES = ("summary-failing", "summary-passing")


@pytest.mark.parametrize("name", PICTURES)
def test_each_picture_was_rendered_from_the_current_golden_summary(name: str) -> None:
    picture, source = ROOT / "docs" / "img" / f"{name}.png", ROOT / "docs" / "img" / f"{name}.source"
    assert picture.read_bytes().startswith(b"\x89PNG"), f"{picture} is missing: run scripts/render_summary_pictures.sh"
    digest, golden = source.read_text().split()
    assert hashlib.sha256((ROOT / golden).read_bytes()).hexdigest() == digest, (
        f"{golden} changed since {picture.name} was rendered: run scripts/render_summary_pictures.sh")
    assert f"docs/img/{name}.png" in (ROOT / "README.md").read_text()
