"""A small PNG per check: its A/B ratio run by run on one runner, the outcome of each run, the step (matplotlib).

matplotlib is in the optional `history` extra (with ruptures; about 80 MB of wheels with numpy and scipy): the
orchestrator installs without it, and `history` without it writes every line and page it can and says that the
pictures were left out and how to get them (`pip install 'torch-upgrade-check[history]'`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from torch_upgrade_check.analysis.trends import FAILING, Finding, History, Point

MISSING = "charts not drawn: matplotlib is not installed here; pip install 'torch-upgrade-check[history]' to draw them"
COLOURS = {"passed": "#2da44e", "suspicious": "#bf8700", "skipped": "#8c959f"}  # failing runs: #cf222e


def available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def file_name(check: str) -> str:
    """A check id as a file name: `mlp[float32]/latency` -> `mlp-float32-latency.png`."""
    return re.sub(r"[^A-Za-z0-9_.]+", "-", check).strip("-") + ".png"


def draw_all(history: History, folder: Path, checks: Iterable[str]) -> dict[str, str]:
    """Each of `checks`' series drawn into `folder`, with its finding's step: {check: file name}; {} without matplotlib."""
    if not available():
        return {}
    findings = {f.check: f for f in history.findings}
    drawn = {}
    for check in checks:
        name = file_name(check)
        draw(history.series[check], check, folder / name, finding=findings.get(check))
        drawn[check] = name
    return drawn


def draw(points: Sequence[Point], check: str, path: Path, *, finding: Finding | None = None) -> Path:
    """Draw one check's series to `path` (PNG): the ratio where it has one, else the outcome alone."""
    import matplotlib

    matplotlib.use("Agg")  # no display on a runner
    from matplotlib import pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 2.2), dpi=80)
    try:
        xs = list(range(len(points)))
        ratios = [p.ratio for p in points]
        if any(r is not None for r in ratios):
            ax.plot([x for x, r in zip(xs, ratios) if r is not None], [r for r in ratios if r is not None],
                    color="#0969da", linewidth=1)
            ax.axhline(1.0, color="#8c959f", linewidth=0.6)
            ax.set_ylabel("ratio")
        ys = [r if r is not None else 1.0 for r in ratios]
        ax.scatter(xs, ys, s=10, zorder=3,
                   c=[("#cf222e" if p.outcome in FAILING else COLOURS.get(p.outcome, "#8c959f")) for p in points])
        if finding is not None and finding.first_bad is not None:
            at = next((i for i, p in enumerate(points) if p.run == finding.first_bad.run), None)
            if at is not None:
                ax.axvline(at - 0.5, color="#cf222e", linestyle="--", linewidth=0.8)
        ax.set_title(check, fontsize=9)
        ticks = sorted({0, len(points) - 1})
        ax.set_xticks(ticks, [points[i].build for i in ticks], fontsize=7)
        fig.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, format="png")
    finally:
        plt.close(fig)
    return path
