"""What scripts/sync_workflow_inputs.py and scripts/docs_tables.py share: the files they read and write, and how a
block between two marker lines is regenerated, then written or (`--check`) only checked. Stdlib only."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ACTION = ROOT / "action.yml"
REUSABLE = ROOT / ".github" / "workflows" / "torch-upgrade-check.yml"
README = ROOT / "README.md"
CONFIGURATION = ROOT / "docs" / "configuration.md"  # the config file's reference, with its keys' table


def replace_block(text: str, begin: str, end: str, rows: list[str], where: str) -> str:
    """`text` with the lines between the marker lines `begin` and `end` replaced by `rows`; ValueError naming
    `where` when a marker line is missing."""
    lines = text.splitlines()
    if begin not in lines or end not in lines:
        raise ValueError(f"{where} lacks its marker lines {begin.strip()!r} … {end.strip()!r}; put them back")
    i, j = lines.index(begin), lines.index(end)
    return "\n".join([*lines[: i + 1], *rows, *lines[j:]]) + "\n"


def write_or_check(path: Path, updated: str, argv: list[str], tool: str) -> int:
    """Write `updated` to `path` when it differs (exit 0); with `--check` in argv only say that it differs
    (exit 1), writing nothing."""
    if path.read_text() == updated:
        return 0
    name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    if "--check" in argv:
        print(f"{tool}: {name} is stale: run python3 scripts/{tool}.py", file=sys.stderr)
        return 1
    path.write_text(updated)
    print(f"updated {name}")
    return 0
