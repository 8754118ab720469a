"""`history --html DIR`: a static page, one chart per check and each check's outcome run by run (no server, no JS)."""

from __future__ import annotations

import html
from pathlib import Path

from torch_upgrade_check.analysis.trends import FAILING, History, summary_lines
from torch_upgrade_check.history import charts
from torch_upgrade_check.schema import atomic_write_text

CELL = {"passed": "#2da44e", "suspicious": "#bf8700", "skipped": "#d0d7de", "not-run": "#cf222e",
        "failed": "#cf222e", "error": "#cf222e"}
LIMIT = 120  # timeline cells a check shows: its newest runs (the chart shows them all)


def write(history: History, folder: Path) -> Path:
    """Draw each check's chart into `folder` (where matplotlib is) and write `folder/index.html` beside them."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    pictures = charts.draw_all(history, folder, history.series)
    path = folder / "index.html"
    atomic_write_text(path, render(history, pictures, missing="" if charts.available() else charts.MISSING))
    return path


def render(history: History, pictures: dict[str, str], *, missing: str = "") -> str:
    """The page's HTML: the summary lines, then per check its chart and its timeline of outcomes."""
    e = html.escape
    body = [f"<h1>torch-upgrade-check history</h1><p>{e(history.runner or 'no runs yet')}: {history.runs} run(s)</p>"]
    lines = summary_lines(history) or ["No check changed: no step, no new failure."]
    body.append("<ul class=summary>" + "".join(f"<li>{e(line)}</li>" for line in lines) + "</ul>")
    if missing:
        body.append(f"<p class=missing>{e(missing)}</p>")
    for check, points in sorted(history.series.items()):
        section = [f'<section class=check data-check="{e(check)}"><h2>{e(check)}</h2>']
        if check in pictures:
            section.append(f'<img src="{e(pictures[check])}" alt="{e(check)}" width=480 height=176>')
        cells = "".join(
            f'<span class="run {"bad" if p.outcome in FAILING else e(p.outcome)}" title="{e(p.build)}: {e(p.outcome)}'
            f'{f", {p.ratio:.3f}x" if p.ratio is not None else ""}" style="background:{CELL.get(p.outcome, "#d0d7de")}">'
            "</span>" for p in points[-LIMIT:])
        section.append(f'<div class=timeline aria-label="outcomes, oldest first">{cells}</div></section>')
        body.append("".join(section))
    return ("<!doctype html><html lang=en><head><meta charset=utf-8><title>torch-upgrade-check history</title>"
            "<style>body{font-family:sans-serif;margin:1em 2em}.timeline{display:flex;gap:1px;flex-wrap:wrap}"
            ".run{display:inline-block;width:8px;height:14px}section{margin:1em 0}</style></head><body>"
            + "\n".join(body) + "</body></html>\n")
