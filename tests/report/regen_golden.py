"""Refresh every golden file from the current renderers: `PYTHONPATH=src python3 tests/report/regen_golden.py`."""

from __future__ import annotations

import shutil
import sys

from report_cases import GOLDEN, cases, render  # the script's folder is on sys.path


def main() -> int:
    shutil.rmtree(GOLDEN, ignore_errors=True)
    for name, reports in cases().items():
        folder = GOLDEN / name
        folder.mkdir(parents=True)
        for filename, text in render(reports).items():
            (folder / filename).write_text(text, encoding="utf-8", newline="\n")
    print(f"wrote {len(cases())} golden cases under {GOLDEN}; review them with git diff")
    return 0


if __name__ == "__main__":
    sys.exit(main())
