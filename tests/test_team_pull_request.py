"""A team's real torch-bump pull request, end to end, with the quick start's settings on the command line.

A git repository made here: `main` pins torch 2.13.0 with torchvision 0.28.0 and timm 1.0.31 (the companions in a
`-r` include, as teams split them); the branch `bump` moves torch to 2.14.1 and torchvision to 0.29.1 together, as
every team must (torchvision 0.28.0 requires torch==2.13.0); the team's own models come from torchvision and timm.
Real packages from the index, real venvs made by the tool (2.14.1 is a 5.5 GB CUDA build that runs on the CPU).
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import cmarkgfm
import pytest
import team_repo as team
from conftest import run_cli
from team_repo import assert_models_ran, git

pytestmark = pytest.mark.slow

# the command: the quick start's settings (both sides auto, the base branch as base-ref, the team's
# requirements and config), with this machine's install flags (PyTorch's own index is unreachable here)
QUICK_START = ("compare", "--baseline", "auto", "--candidate", "auto", "--base-ref", "main",
               "--requirements", "requirements.txt", "--config", "torch-upgrade-check.yml",
               "--torch-backend", "pypi", "--installer", "pip", "--device", "cpu", "--threads", "1")


@pytest.fixture(scope="module")
def team_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return team.make(tmp_path_factory.mktemp("team") / "repo")


@pytest.fixture(scope="module")
def venvs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("team-venvs")
    yield path
    shutil.rmtree(path, ignore_errors=True)  # 2.14.1 alone is 5.5 GB


def by_id(report: dict) -> dict[str, dict]:
    return {r["id"]: r for r in report["results"]}


def test_a_pull_request_that_bumps_torch_and_torchvision_together_is_checked(team_repo: Path, venvs: Path,
                                                                               tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = run_cli(*QUICK_START, "--venv-dir", str(venvs), "--out", str(out), cwd=team_repo, timeout=1800)
    log = proc.stdout[-6000:] + proc.stderr[-3000:]
    baseline, candidate = json.loads((out / "report.json").read_text())["reports"]
    cand, base = by_id(candidate), by_id(baseline)
    failing = [r["id"] for r in candidate["results"] if r["outcome"] in ("failed", "error", "not-run")]
    assert proc.returncode == (1 if failing else 0), log  # the verdicts decide: never exit 2 or 3 here
    # each side's stack from its own ref, the -r include too, and the bump listed as the team's
    assert "baseline: the stack is requirements.txt at --base-ref main" in proc.stdout, log
    assert "candidate: the stack is requirements.txt in the working tree" in proc.stdout, log
    resolved = cand["stack[-]/resolve"]
    assert resolved["outcome"] == "passed", resolved["reason"]
    assert any(re.fullmatch(r"torchvision 0\.28\.0 -> 0\.29\.1", line) for line in resolved["metrics"]["pinned"]), resolved
    assert not any(line.startswith("torchvision ") for line in resolved["metrics"]["unasked"]), resolved
    assert "changed by the team's requirements: torchvision 0.28.0 -> 0.29.1" in resolved["reason"]
    assert base["stack[-]/resolve"]["outcome"] == "passed"
    # each venv has its side's own companions, and the team's models ran under both torches
    assert baseline["environment"]["torch_version"].startswith("2.13.0")
    assert candidate["environment"]["torch_version"].startswith("2.14.1")
    assert baseline["environment"]["packages"]["torchvision"].startswith("0.28.0")
    assert candidate["environment"]["packages"]["torchvision"].startswith("0.29.1")
    assert_models_ran(base, cand)
    summary = cmarkgfm.github_flavored_markdown_to_html((out / "summary.md").read_text())  # as GitHub shows it
    assert "<td>package torchvision (your requirements changed it)</td>\n<td>0.28.0</td>\n<td>0.29.1</td>" in summary, \
        summary[-3000:]


def test_a_pull_request_that_bumps_torch_alone_fails_resolve_naming_torchvision(team_repo: Path, venvs: Path,
                                                                                tmp_path: Path) -> None:
    git(team_repo, "checkout", "-q", "torch-only")
    try:
        proc = run_cli(*QUICK_START, "--venv-dir", str(tmp_path / "venvs"), "--out", str(tmp_path / "out"),
                       cwd=team_repo)
    finally:
        git(team_repo, "checkout", "-q", "bump")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr
    candidate = json.loads((tmp_path / "out" / "report.json").read_text())["reports"][1]
    resolved = by_id(candidate)["stack[-]/resolve"]
    assert resolved["outcome"] == "failed"
    assert "torchvision 0.28.0 requires torch==2.13.0" in resolved["reason"], resolved["reason"]
    assert re.search(r"torchvision 0\.29\.\d+ accepts torch 2\.14\.1", resolved["reason"]), resolved["reason"]
    assert not (tmp_path / "venvs").exists()  # nothing installed for either side


def test_a_base_ref_whose_own_stack_cannot_resolve_is_the_teams_file_exit_2(team_repo: Path, tmp_path: Path) -> None:
    argv = [*QUICK_START]
    argv[argv.index("main")] = "broken"
    proc = run_cli(*argv, "--venv-dir", str(tmp_path / "venvs"), "--out", str(tmp_path / "out"), cwd=team_repo)
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("torch-upgrade-check: error: the baseline's stack (requirements.txt at --base-ref broken) "
                           "cannot be installed: the stack does not resolve with torch 2.13.0"), proc.stderr
    assert "fix those files there, or pass --baseline VERSION" in line and "Traceback" not in proc.stderr
    assert "infrastructure" not in proc.stderr
    baseline = json.loads((tmp_path / "out" / "report.json").read_text())["reports"][0]
    assert by_id(baseline)["stack[-]/resolve"]["outcome"] == "error"  # the report says which check found it
    assert (tmp_path / "out" / "summary.md").is_file()
    assert not (tmp_path / "venvs").exists()
