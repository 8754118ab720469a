"""The history store: a folder holding records.jsonl (one record a line, oldest first) and compacted/NNNN.jsonl.gz.

No server: the folder lives on a branch of the team's repository (github-action-benchmark's convention); the
publisher (history/publish.py) commits it and pushes, retrying on a rejected push. This module only reads and
appends a folder. A line that is not a record (a write cut short, a merge gone wrong) is reported and skipped, never
fatal: one bad line must not cost the team its history.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch_upgrade_check.history.record import READABLE, SCHEMA, SCHEMA_PREFIX
from torch_upgrade_check.schema import atomic_write_text

RECORDS = "records.jsonl"
COMPACTED = "compacted"
# records.jsonl is rolled when it passes MAX_RECORDS lines: all but the newest KEEP go into one compacted file, so
# a day's append rewrites at most a few hundred lines and git's diff of the branch stays small
MAX_RECORDS = 500
KEEP = 100
_CHUNK = re.compile(r"^(\d{4,})\.jsonl\.gz$")


@dataclass
class StoreRead:
    """Every record, oldest first, and one line per line that could not be read (file, line number, why)."""

    records: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def append(store_dir: Path, record: dict[str, Any], *, max_records: int = MAX_RECORDS, keep: int = KEEP) -> None:
    """Append one record as a line of store_dir/records.jsonl; past max_records lines, roll the oldest away."""
    if not isinstance(record, dict) or record.get("schema") not in READABLE:  # an older tool's record file too
        raise ValueError(f"a history record must carry schema {SCHEMA!r}; build it with history.record.from_report")
    store_dir = Path(store_dir)
    store_dir.mkdir(parents=True, exist_ok=True)
    path = store_dir / RECORDS
    line = json.dumps(record, sort_keys=True, separators=(",", ":"), allow_nan=False) + "\n"
    # a last line cut short (no newline) stays its own bad line: the new record starts on a line of its own
    lead = "\n" if _ends_without_newline(path) else ""
    with open(path, "a", encoding="utf-8") as f:  # one write of the whole line, appended
        f.write(lead + line)
        f.flush()
        os.fsync(f.fileno())
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    if len(lines) > max_records:
        _roll(store_dir, lines, keep)


def read(store_dir: Path) -> list[dict[str, Any]]:
    """Every record, oldest first (compacted files, then records.jsonl); bad lines are reported on stderr."""
    got = load(store_dir)
    for problem in got.problems:
        print(f"torch-upgrade-check: warning: {problem}", file=sys.stderr)
    return got.records


def load(store_dir: Path) -> StoreRead:
    """Every record and every problem; a missing folder or file is an empty store, not a problem."""
    store_dir = Path(store_dir)
    got = StoreRead()
    seen: set[str] = set()
    for chunk in _chunks(store_dir):
        try:
            with gzip.open(chunk, "rt", encoding="utf-8") as f:
                text = f.read()
        except (OSError, EOFError, UnicodeDecodeError) as e:
            got.problems.append(f"{_shown(chunk, store_dir)}: cannot be read ({e}); its records are left out")
            continue
        _parse(text.splitlines(), _shown(chunk, store_dir), got, seen)
    path = store_dir / RECORDS
    if path.is_file():
        _parse(path.read_text(encoding="utf-8", errors="replace").splitlines(), RECORDS, got, seen)
    return got


def _parse(lines: Iterable[str], name: str, got: StoreRead, seen: set[str]) -> None:
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            got.problems.append(f"{name} line {number} is not JSON ({e.msg}); skipped")
            continue
        schema = record.get("schema") if isinstance(record, dict) else None
        if not isinstance(schema, str) or not schema.startswith(SCHEMA_PREFIX):
            got.problems.append(f"{name} line {number} is not a history record (no schema {SCHEMA!r}); skipped")
            continue
        if schema not in READABLE:  # a newer tool's record: its fields may mean something else
            got.problems.append(f"{name} line {number} has schema {schema!r}; this torch-upgrade-check reads "
                                f"{' and '.join(map(repr, READABLE))}: upgrade it to read that record; skipped")
            continue
        key = json.dumps(record, sort_keys=True)
        if key in seen:  # a roll cut short after its compacted file was written: the same line twice
            continue
        seen.add(key)
        got.records.append(record)


def _chunks(store_dir: Path) -> list[Path]:
    folder = store_dir / COMPACTED
    if not folder.is_dir():
        return []
    found = [(int(m[1]), p) for p in folder.iterdir() if (m := _CHUNK.match(p.name))]
    return [p for _, p in sorted(found)]


def _roll(store_dir: Path, lines: list[str], keep: int) -> None:
    """Move all but the newest `keep` lines into the next compacted/NNNN.jsonl.gz, then rewrite records.jsonl.

    The compacted file is written (atomically) before records.jsonl loses its lines: a roll cut short leaves a line
    in both, which `load` reads once, never a line in neither.
    """
    old, rest = lines[: len(lines) - keep], lines[len(lines) - keep:]
    chunks = _chunks(store_dir)
    number = int(_CHUNK.match(chunks[-1].name)[1]) + 1 if chunks else 1
    folder = store_dir / COMPACTED
    folder.mkdir(exist_ok=True)
    target = folder / f"{number:04d}.jsonl.gz"
    tmp = folder / f".{target.name}.tmp"
    # mtime=0: the same records give the same bytes, so two jobs rolling alike do not conflict in git
    with open(tmp, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:
        f.write("".join(line if line.endswith("\n") else line + "\n" for line in old).encode("utf-8"))
    os.replace(tmp, target)
    atomic_write_text(store_dir / RECORDS, "".join(rest))


def _ends_without_newline(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            if f.tell() == 0:
                return False
            f.seek(-1, os.SEEK_END)
            return f.read(1) != b"\n"
    except FileNotFoundError:
        return False


def _shown(path: Path, store_dir: Path) -> str:
    return path.relative_to(store_dir).as_posix()
