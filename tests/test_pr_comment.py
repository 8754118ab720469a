"""scripts/pr_comment.py: which downloaded artifact's summary workflows/pr-comment.yml posts, and that the workflow carries
the module verbatim and runs it (torch-free)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / "workflows" / "pr-comment.yml"
SCRIPT = ROOT / "scripts" / "pr_comment.py"


def _module() -> ModuleType:
    """scripts/pr_comment.py as a module (a workflow script: not part of the package)."""
    spec = importlib.util.spec_from_file_location("pr_comment", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


pr_comment = _module()

def _artifact(folder: Path, name: str, summary: str | None, *, runner: bool = False) -> None:
    """One artifact as actions/download-artifact lays it out with a `pattern`: a folder named after it."""
    (folder / name).mkdir(parents=True)
    if summary is not None:
        (folder / name / "summary.md").write_text(summary)
    (folder / name / "report.json").write_text("{}")
    if runner:  # the reusable workflow's per-runner artifact
        (folder / name / "runner-status.json").write_text("{}")


def _script() -> str:
    """The inline script of the workflow's comment step, as bash's heredoc hands it to python3."""
    (step,) = [s for s in yaml.safe_load(WORKFLOW.read_text())["jobs"]["comment"]["steps"]
               if s.get("id") == "write"]
    run = step["run"]
    start = run.index("<<'PY'\n") + len("<<'PY'\n")
    return run[start:run.index("\nPY\n", start) + 1]


def test_the_reusable_workflows_merged_summary_wins_over_its_runners_reports(tmp_path: Path) -> None:
    _artifact(tmp_path, "torch-upgrade-check-report-0-ubuntu-latest", "runner 0", runner=True)
    _artifact(tmp_path, "torch-upgrade-check-report-1-self-hosted-cuda", "runner 1", runner=True)
    _artifact(tmp_path, "torch-upgrade-check-merged", "merged")
    assert [name for name, _ in pr_comment.pick(tmp_path)] == ["torch-upgrade-check-merged"]


def test_a_matrix_of_the_action_posts_every_jobs_summary_in_job_order(tmp_path: Path) -> None:
    for i in (10, 2, 0, 1):  # job 10 after job 2: numbers compared as numbers
        _artifact(tmp_path, f"torch-upgrade-check-report-{i}", f"summary of job {i}")
    chosen = pr_comment.pick(tmp_path)
    assert [name for name, _ in chosen] == [f"torch-upgrade-check-report-{i}" for i in (0, 1, 2, 10)]
    text = pr_comment.body([(n, p.read_text()) for n, p in chosen], "https://github.example/run/1")
    assert text.startswith(pr_comment.MARKER + "\n")
    assert text.index("summary of job 0") < text.index("summary of job 1") < text.index("summary of job 10")
    assert "**Artifact `torch-upgrade-check-report-2`**" in text
    assert text.endswith("[Full report and artifacts](https://github.example/run/1)\n")


def test_the_single_action_artifact_is_posted_as_it_is(tmp_path: Path) -> None:
    _artifact(tmp_path, "torch-upgrade-check-report", "## torch upgrade check: passed\n")
    (chosen,) = pr_comment.pick(tmp_path)
    text = pr_comment.body([(chosen[0], chosen[1].read_text())], "u")
    assert text == f"{pr_comment.MARKER}\n## torch upgrade check: passed\n\n\n[Full report and artifacts](u)\n"


def test_runners_reports_are_posted_when_the_merge_uploaded_nothing(tmp_path: Path) -> None:
    _artifact(tmp_path, "torch-upgrade-check-report-1-macos-14", "runner 1", runner=True)
    _artifact(tmp_path, "torch-upgrade-check-report-0-ubuntu-latest", "runner 0", runner=True)
    _artifact(tmp_path, "torch-upgrade-check-report-2-self-hosted", None, runner=True)  # no report: nothing to show
    assert [name for name, _ in pr_comment.pick(tmp_path)] == ["torch-upgrade-check-report-0-ubuntu-latest",
                                                                "torch-upgrade-check-report-1-macos-14"]


def test_nothing_downloaded_writes_no_comment_and_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "comment.md"
    assert pr_comment.main([str(tmp_path / "summary"), "u", str(out)]) == 0  # the folder was never made
    _artifact(tmp_path / "summary", "torch-upgrade-check-report", None)  # an artifact without a summary
    assert pr_comment.main([str(tmp_path / "summary"), "u", str(out)]) == 0
    assert not out.exists()
    assert capsys.readouterr().out.count("no torch-upgrade-check summary among the artifacts") == 2


def test_a_long_summary_is_cut_to_fit_a_comment_saying_so() -> None:
    text = pr_comment.body([("a", "x" * 70000), ("b", "y" * 10)], "u")
    assert len(text) <= pr_comment.LIMIT and "(summary cut here to fit a comment)" in text
    assert text.startswith(pr_comment.MARKER) and text.endswith("(u)\n")


def test_a_symlinked_summary_is_not_read(tmp_path: Path) -> None:
    # an artifact is untrusted: a link out of it (to the runner's files) is not followed
    secret = tmp_path / "secret.txt"
    secret.write_text("token")
    (tmp_path / "summary" / "torch-upgrade-check-report").mkdir(parents=True)
    (tmp_path / "summary" / "torch-upgrade-check-report" / "summary.md").symlink_to(secret)
    assert pr_comment.pick(tmp_path / "summary") == []


def test_the_workflow_carries_the_module_verbatim() -> None:
    assert _script() == SCRIPT.read_text(), (
        "workflows/pr-comment.yml's inline script differs from scripts/pr_comment.py: copy the "
        "module into the step's heredoc (indented ten spaces)")


def test_the_workflows_script_runs_and_picks_the_matrix_summaries(tmp_path: Path) -> None:
    folder = tmp_path / "summary"
    _artifact(folder, "torch-upgrade-check-report-1", "job 1")
    _artifact(folder, "torch-upgrade-check-report-0", "job 0")
    out = tmp_path / "comment.md"
    proc = subprocess.run([sys.executable, "-", str(folder), "https://run", str(out)], input=_script(), text=True,
                          capture_output=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "torch-upgrade-check-report-0, torch-upgrade-check-report-1" in proc.stdout
    text = out.read_text()
    assert text.startswith(pr_comment.MARKER) and text.index("job 0") < text.index("job 1")


def test_the_workflow_downloads_every_artifact_of_ours_and_comments_only_when_one_was_found() -> None:
    steps = {s.get("name"): s for s in yaml.safe_load(WORKFLOW.read_text())["jobs"]["comment"]["steps"]}
    download = steps["Download the summaries"]
    assert download["with"]["pattern"] == "torch-upgrade-check-*" and "name" not in download["with"]
    assert "merge-multiple" not in download["with"]  # one folder per artifact, which pick() reads
    post = steps["Post it, or update this workflow's earlier comment"]
    assert post["if"] == "steps.write.outputs.found == 'true'"
    assert "GH_TOKEN" not in steps["Write the comment"].get("env", {})  # the untrusted text meets no token
