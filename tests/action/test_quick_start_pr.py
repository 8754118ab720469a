"""The README's quick start, as a team runs it: its workflow file in the team's repository, on a pull_request event
whose merge commit bumps torch 2.13.0 -> 2.14.1 and torchvision 0.28.0 -> 0.29.1 together, run by act.

The team's repository is tests/team_repo.py's (real torchvision and timm models, the companions in a `-r` include);
the workflow is workflows/torch-upgrade-check.yml as the README prints it, `OWNER/torch-upgrade-check@<SHA>` mapped
to this repository. One input is added: `torch-backend: pypi`, since PyTorch's own index cannot be reached from
the machines these tests run on. The action installs torch with uv, which reads none of pip's configuration: the
test hands it pip's own sources (act_harness.pip_sources), so both installers find the same packages.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import cmarkgfm
import pytest
import team_repo as team
from act_harness import ROOT, act_or_skip, copy_repository, pip_sources, run_act_event
from team_repo import assert_models_ran, git

pytestmark = [pytest.mark.act, pytest.mark.slow]

QUICK_START = ROOT / "workflows" / "torch-upgrade-check.yml"


@pytest.fixture(scope="module")
def act() -> str:
    return act_or_skip()


def quick_start() -> str:
    text = QUICK_START.read_text()
    line = "          upload-report: true\n"
    assert line in text, "the quick start's action step changed: update this test"
    return text.replace(line, line + "          torch-backend: pypi  # PyTorch's own index is unreachable here\n")


def test_the_quick_start_checks_a_pull_request_that_bumps_torch_and_torchvision(act: str, tmp_path: Path) -> None:
    caller = team.make(tmp_path / "team", extra={".github/workflows/torch-upgrade-check.yml": quick_start()})
    # GitHub checks out refs/pull/N/merge: the branch merged into main, the base branch its first parent
    git(caller, "checkout", "-q", "--detach", "main")
    git(caller, "merge", "-q", "--no-ff", "-m", "Merge bump into main", "bump")
    event = {"number": 7, "pull_request": {"number": 7, "head": {"ref": "bump", "sha": git(caller, "rev-parse", "bump").strip()},
                                           "base": {"ref": "main", "sha": git(caller, "rev-parse", "main").strip()}}}
    repo = copy_repository(tmp_path / "action")
    cache = tmp_path / "xdg-cache"  # the venv store (5.5 GB for 2.14.1), removed below
    try:
        run = run_act_event(act, caller, "pull_request", event, caller / ".github/workflows/torch-upgrade-check.yml",
                            tmp=tmp_path, repo=repo, env={**pip_sources(), "XDG_CACHE_HOME": str(cache)},
                            timeout_s=1800)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    text = run.text()
    assert "baseline: the stack is requirements.txt at --base-ref HEAD^1" in text, run.explain()
    assert re.search(r"candidate: resolve passed: .*changed by the team's requirements: torchvision 0\.28\.0 -> 0\.29\.1",
                     text), run.explain()
    report_dir = run.artifacts / "torch-upgrade-check-report"
    baseline, candidate = json.loads((report_dir / "report.json").read_text())["reports"]
    assert baseline["environment"]["packages"]["torchvision"].startswith("0.28.0"), run.explain()
    assert candidate["environment"]["packages"]["torchvision"].startswith("0.29.1")
    failing = [r["id"] for r in candidate["results"] if r["outcome"] in ("failed", "error", "not-run")]
    assert run.job("torch upgrade check") == ("failure" if failing else "success"), run.explain()
    assert_models_ran({r["id"]: r for r in baseline["results"]}, {r["id"]: r for r in candidate["results"]})
    summary = cmarkgfm.github_flavored_markdown_to_html("\n".join(run.summaries()))  # as GitHub renders it
    assert "<td>package torchvision (your requirements changed it)</td>\n<td>0.28.0</td>\n<td>0.29.1</td>" in summary, \
        summary[-3000:]
