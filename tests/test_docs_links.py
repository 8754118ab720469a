"""Every relative link in the README, CONTRIBUTING.md and docs/ reaches a file, and its #anchor a heading of that
file (as GitHub makes anchors from headings), so text moved between them keeps its links; so does every
`docs/FILE.md#anchor` a comment of the code points to."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import ROOT

PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
CODE_LINK = re.compile(r"docs/[\w.-]+\.md#[\w-]+")


def anchors(text: str) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces to hyphens, a repeated
    one numbered (-1, -2, …)."""
    found: set[str] = set()
    for heading in re.findall(r"^#{1,6} (.+)$", FENCE.sub("", text), re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        n = 0
        while (anchor := slug if n == 0 else f"{slug}-{n}") in found:
            n += 1
        found.add(anchor)
    return found


def broken_links(text: str, page: Path) -> list[str]:
    """The relative links of `text` (the page at `page`, code blocks left out) whose file or heading is missing."""
    broken = []
    for target in LINK.findall(FENCE.sub("", text)):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if path and not file.exists():
            broken.append(f"{target}: no file {path}")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file.read_text() if path else text):
            broken.append(f"{target}: no heading #{anchor} in {file.name}")
    return broken


def test_every_relative_link_of_the_docs_reaches_its_file_and_heading() -> None:
    broken = {p.name: b for p in PAGES if (b := broken_links(p.read_text(), p))}
    assert not broken, broken


def test_every_docs_anchor_the_code_points_to_exists() -> None:
    sources = [*(ROOT / "src").rglob("*.py"), *(ROOT / "benchmarks").glob("*.py")]
    pointed = {(s.name, link) for s in sources for link in CODE_LINK.findall(s.read_text())}
    assert pointed, "the A/B constants' comments point to docs/benchmarks.md"
    broken = [(name, b) for name, link in sorted(pointed) for b in broken_links(f"[x]({link})", ROOT / "page.md")]
    assert not broken, broken


def test_a_missing_file_or_heading_is_found() -> None:
    text = ("# What `run` checks\n## Your team's stack: resolve, imports, abi\n## compare\n```\n# not a heading\n```\n"
            "## compare\n")
    assert anchors(text) == {"what-run-checks", "your-teams-stack-resolve-imports-abi", "compare", "compare-1"}
    links = "[a](missing.md) [b](#compare-1) [c](#not-a-heading) [d](benchmarks.md#cost-of-a-run) [e](cli.md#nowhere)"
    assert broken_links(text + links, ROOT / "docs" / "page.md") == [
        "missing.md: no file missing.md", "#not-a-heading: no heading #not-a-heading in page.md",
        "cli.md#nowhere: no heading #nowhere in cli.md"]
