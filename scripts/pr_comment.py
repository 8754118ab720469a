"""workflows/pr-comment.yml's helper: the artifacts it downloaded -> the pull request comment's body.

The comment workflow has no checkout and no install of this package (it holds a token that writes), so it
carries this file verbatim as its inline script (`python3 - FOLDER RUN_URL OUT`);
tests/test_pr_comment.py fails when the two differ. Stdlib only, no import of the package.

FOLDER holds one subfolder per artifact (actions/download-artifact with a `pattern`). Which summary is posted:
1. the reusable workflow's combined one (`<artifact-name>-merged`), when there is one;
2. else the action's own (`upload-report`): `torch-upgrade-check-report`, or in a `strategy.matrix`
   `torch-upgrade-check-report-<job-index>`, every job's summary one after the other in job order;
3. else the reusable workflow's per-runner reports (its merge job uploaded nothing), in runner order.
Nothing found: OUT is not written and a line says so. Every file is read as untrusted text.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

MARKER = "<!-- torch-upgrade-check -->"  # the first line, by which the next run finds this comment to update it
LIMIT = 60000  # GitHub refuses comments over 65536 characters


def _summary(artifact: Path) -> Path | None:
    path = artifact / "summary.md"
    return path if path.is_file() and not path.is_symlink() else None


def _order(name: str) -> list[int | str]:
    """Natural order: `...-report-2` before `...-report-10`."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def pick(folder: Path) -> list[tuple[str, Path]]:
    """The (artifact name, summary.md) pairs to post, in order; [] when no artifact holds a summary."""
    if not folder.is_dir():
        return []
    found = {d.name: s for d in folder.iterdir() if d.is_dir() and not d.is_symlink() and (s := _summary(d))}
    merged = [n for n in found if n.endswith("-merged")]
    # a runner's artifact of the reusable workflow carries its runner-status.json beside the summary
    runners = [n for n in found if n not in merged and (folder / n / "runner-status.json").exists()]
    action = [n for n in found if n not in merged and n not in runners]
    chosen = merged or action or runners
    return [(n, found[n]) for n in sorted(chosen, key=_order)]


def body(summaries: list[tuple[str, str]], run_url: str) -> str:
    """The comment: the marker, each summary (headed by its artifact's name when there are several), the run's
    link; cut to fit a comment, saying so."""
    note = f"\n\n[Full report and artifacts]({run_url})\n"
    if len(summaries) == 1:
        text = summaries[0][1]
    else:
        text = "\n\n---\n\n".join(f"**Artifact `{name}`**\n\n{summary}" for name, summary in summaries)
    limit = LIMIT - len(MARKER) - len(note) - 100
    if len(text) > limit:
        text = text[:limit] + "\n\n(summary cut here to fit a comment)"
    return f"{MARKER}\n{text}{note}"


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: pr_comment.py FOLDER RUN_URL OUT", file=sys.stderr)
        return 2
    folder, run_url, out = Path(argv[0]), argv[1], Path(argv[2])
    chosen = pick(folder)
    if not chosen:
        print(f"no torch-upgrade-check summary among the artifacts downloaded into {folder} (the check was skipped, "
              "or uploaded none under the download step's pattern); nothing to comment")
        return 0
    summaries = []
    for name, path in chosen:
        with path.open(encoding="utf-8", errors="replace") as f:
            summaries.append((name, f.read(LIMIT + 1)))
    out.write_text(body(summaries, run_url), encoding="utf-8")
    print("commenting with the summary of " + ", ".join(name for name, _ in chosen))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
