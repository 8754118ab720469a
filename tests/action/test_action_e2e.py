"""The real action and the real reusable workflow, run end to end by `act` on this machine's CPU with real torch.

Each run uses the test interpreter (torch 2.13.0) as the action's `python` and one or two tiny checks, so a
run takes seconds: installing the tool into its own venv, then `compare` (or `run`) in real worker processes.
"""

from __future__ import annotations

import json
import shutil
import venv
from pathlib import Path

import pytest
from act_harness import ActRun, act_or_skip, copy_repository, run_act

pytestmark = [pytest.mark.act, pytest.mark.slow]

LATENCY_CHECK = "matmul[float32]/latency"
COUNTS = ("passed", "suspicious", "failed", "errors", "skipped", "not-run", "total", "not-judged")
IMPOSSIBLE_LIMIT = "matmul=0.000001"  # milliseconds: no matmul is that fast


@pytest.fixture(scope="module")
def act() -> str:
    path = act_or_skip()
    if not shutil.which("git"):
        pytest.skip("git is needed to give act a repository to run in")
    return path


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_repository(tmp_path_factory.mktemp("action-repo"))


def _report(run: ActRun) -> dict:
    return json.loads((run.out / "report" / "report.json").read_text())


def test_compare_passes_and_writes_summary_outputs_and_report(act: str, repo: Path, tmp_path: Path,
                                                              torch_python: str) -> None:
    run = run_act(act, "run-action.yml", {"python": torch_python, "torch-version": "current",
                                          "baseline-torch-version": "current", "suite": "mlp[float32]/numerics"},
                  tmp=tmp_path, repo=repo)
    assert run.job("check") == "success", run.explain()
    assert "torch-upgrade-check compare --candidate current --baseline current" in run.text()
    out = run.outputs()
    assert out["verdict"] == "passed", out
    assert int(out["passed"]) >= 1 and out["failed"] == out["errors"] == out["not-run"] == "0"
    assert out["shared-failures"] == "0"  # the action's output, through action.yml's outputs
    assert int(out["total"]) >= int(out["passed"])
    for name in ("report", "junit", "summary"):
        assert Path(out[name]).name == {"report": "report.json", "junit": "junit.xml", "summary": "summary.md"}[name]
    summary = "\n".join(run.summaries("check"))
    assert "passed" in summary and "mlp" in summary, summary
    for name in ("report.json", "junit.xml", "summary.md"):
        assert (run.out / "report" / name).is_file()
        # upload-report (default true): the report folder is the run's artifact under its stable name
        assert (run.artifacts / "torch-upgrade-check-report" / name).is_file(), sorted(run.artifacts.rglob("*"))


def test_zero_tolerances_fail_only_where_outputs_differ_bitwise(act: str, repo: Path, tmp_path: Path,
                                                              torch_python: str) -> None:
    # rtol 0 and atol 0: exact equality. The same torch on both sides is bitwise equal to itself (passes);
    # float32 against the float64 golden is not (fails, saying so). That failure is the baseline's too, at the same
    # size: by default a warning (the model's own), so fail-on-shared-failures asks for the failure here.
    run = run_act(act, "run-action.yml", {"python": torch_python, "torch-version": "current",
                                          "baseline-torch-version": "current", "rtol": "0", "atol": "0",
                                          "fail-on-shared-failures": "true",
                                          "suite": "mlp[float32]/cross-version, mlp[float32]/numerics"},
                  tmp=tmp_path, repo=repo)
    assert run.job("check") == "failure", run.explain()
    assert "--rtol 0 --atol 0" in run.text()
    candidate = next(rep for rep in _report(run)["reports"] if rep["role"] == "candidate")
    outcomes = {r["id"]: r for r in candidate["results"]}
    assert outcomes["mlp[float32]/cross-version"]["outcome"] == "passed", outcomes
    numerics = outcomes["mlp[float32]/numerics"]
    assert numerics["outcome"] == "failed" and "bitwise" in numerics["reason"], numerics
    assert run.outputs()["verdict"] == "failed"


def test_bisect_names_the_first_bad_nightly_after_a_failed_compare(act: str, repo: Path, tmp_path: Path,
                                                                  torch_python: str) -> None:
    # a local index of relabelled "nightlies" (tests/harness/nightlies.py) whose outputs drift from the fifth on
    from harness.nightlies import nightly_index

    versions = [f"2.14.0.dev202611{10 + i:02d}" for i in range(6)]
    url = nightly_index(torch_python, tmp_path / "index", versions, fault_from=4, drift=1e-3)
    run = run_act(act, "run-action.yml", {"python": torch_python, "torch-version": versions[-1],
                                          "baseline-torch-version": versions[0], "index-url": url, "bisect": "true",
                                          "suite": "mlp[float32]/numerics, matmul[float32]/numerics"},
                  tmp=tmp_path, repo=repo)
    assert run.job("check") == "failure", run.explain()  # the compare failed; the bisection explains, not excuses
    out = run.outputs()
    assert out["verdict"] == "failed" and out["report"].endswith("report.json"), out
    assert (out["bisect-outcome"], out["bisect-first-bad"], out["bisect-last-good"]) == (
        "found", versions[4], versions[3]), out
    assert out["bisect-report"].endswith("bisect/report.json") and "/compare/" in out["bisect-compare-url"]
    assert (run.out / "report" / "bisect" / "report.json").is_file()
    summary = "\n".join(run.summaries("check"))
    assert "first bad build found" in summary and f"`{versions[4]}`" in summary, summary
    line = next(ln for ln in run.text().splitlines() if "bisecting the failed checks:" in ln)
    # only what failed (Linear drifts: mlp's checks); matmul, which uses no Linear, passed and is left out
    assert "--only 'mlp[float32]/cross-version'" in line and "matmul" not in line, line


def test_latency_threshold_fails_the_job_after_writing_everything(act: str, repo: Path, tmp_path: Path,
                                                                   torch_python: str) -> None:
    run = run_act(act, "run-action.yml", {"python": torch_python, "torch-version": "current",
                                          "suite": LATENCY_CHECK, "max-latency-ms": IMPOSSIBLE_LIMIT},
                  tmp=tmp_path, repo=repo)
    assert run.job("check") == "failure", run.explain()
    out = run.outputs()
    assert out["verdict"] == "failed" and out["failed"] == "1", out
    summary = "\n".join(run.summaries("check"))
    assert "failed" in summary and "limit" in summary and "matmul" in summary, summary
    result = next(r for r in _report(run)["results"] if r["id"] == LATENCY_CHECK)
    assert result["outcome"] == "failed"
    assert "torch-upgrade-check: failing the step: thresholds crossed" in run.text()


def test_fail_on_none_reports_the_failure_and_passes_the_job(act: str, repo: Path, tmp_path: Path,
                                                             torch_python: str) -> None:
    run = run_act(act, "run-action.yml", {"python": torch_python, "torch-version": "current", "fail-on": "none",
                                          "suite": LATENCY_CHECK, "max-latency-ms": IMPOSSIBLE_LIMIT},
                  tmp=tmp_path, repo=repo)
    assert run.job("check") == "success", run.explain()
    out = run.outputs()
    assert out["verdict"] == "failed" and out["failed"] == "1", out
    assert "failed" in "\n".join(run.summaries("check"))
    assert "--fail-on none" in run.text()


def test_bad_inputs_fail_the_job_with_one_line_each_before_anything_runs(act: str, repo: Path, tmp_path: Path,
                                                                          torch_python: str) -> None:
    run = run_act(act, "run-action.yml", {"python": torch_python, "rtol": "abc", "fail-on": "speed"},
                  tmp=tmp_path, repo=repo)
    assert run.job("check") == "failure", run.explain()
    lines = run.text().splitlines()
    assert ("torch-upgrade-check: error: input 'rtol' must be a number ≥ 0 like 1e-4 (0 turns that part of the "
            "tolerance off), got 'abc'") in lines
    assert any(line.startswith("torch-upgrade-check: error: input 'fail-on' must be a comma-separated list")
               for line in lines), lines
    assert not (run.out / "report").exists()
    assert not any(run.artifacts.iterdir())  # no report folder, nothing uploaded, and the upload did not fail
    # the run page shows each problem as an annotation titled by its input, not only "exit code 2"
    errors = [(title, message) for level, title, message in run.annotations("check") if level == "error"]
    assert [title for title, _ in errors] == ["torch-upgrade-check: input 'rtol'", "torch-upgrade-check: input 'fail-on'"]
    assert errors[0][1].startswith("input 'rtol' must be a number ≥ 0")
    out = run.outputs()  # and the steps after this one can tell what happened
    assert out["verdict"] == "error" and all(out[k] == "0" for k in COUNTS), out


def test_a_python_that_does_not_exist_is_an_annotation_and_verdict_error(act: str, repo: Path, tmp_path: Path) -> None:
    run = run_act(act, "run-action.yml", {"python": str(tmp_path / "no-such-python")}, tmp=tmp_path, repo=repo)
    assert run.job("check") == "failure", run.explain()
    annotations = run.annotations("check")
    assert len(annotations) == 1, run.explain()
    ((level, title, message),) = annotations
    assert (level, title) == ("error", "torch-upgrade-check: input 'python'") and "not found" in message
    out = run.outputs()  # written by the action's setup step: the tool's venv does not exist yet
    assert out["verdict"] == "error" and all(out[k] == "0" for k in COUNTS), out


def test_matrix_of_two_runners_merges_into_one_summary(act: str, repo: Path, tmp_path: Path,
                                                       torch_python: str) -> None:
    run = run_act(act, "call-reusable.yml",
                  {"python": torch_python, "suite": "mlp[float32]/numerics",
                   "runners": '[["ubuntu-latest"], ["linux-cpu"]]'},
                  tmp=tmp_path, repo=repo, platforms=("ubuntu-latest", "linux-cpu"))
    assert run.job("check on ubuntu-latest") == "success", run.explain()
    assert run.job("check on linux-cpu") == "success", run.explain()
    assert run.job("combined summary") == "success", run.explain()
    reports = sorted(p.name for p in run.artifacts.glob("torch-upgrade-check-report-*"))
    assert len(reports) == 2 and all((run.artifacts / name / "report.json").is_file() for name in reports), reports
    statuses = [json.loads((run.artifacts / name / "runner-status.json").read_text()) for name in reports]
    # act leaves strategy.job-index empty (index null: the merge matches the runners by their labels)
    assert sorted((s["runner"], s["index"], s["job_status"], s["report"]) for s in statuses) == [
        (["linux-cpu"], None, "success", True), (["ubuntu-latest"], None, "success", True)]
    assert (run.artifacts / "torch-upgrade-check-merged" / "summary.md").is_file()
    combined = run.summaries("combined summary")
    assert len(combined) == 1, combined
    assert "2 checks" in combined[0] and combined[0].count("#1") >= 1 and combined[0].count("#2") >= 1, combined[0]
    assert "reusable-workflow verdict=passed result=success" in run.text("report the verdict")
    outputs = run.workflow_outputs()  # the action's outputs, merged over both runners
    assert outputs == {"verdict": "passed", "passed": "2", "suspicious": "0", "shared-failures": "0", "failed": "0",
                       "errors": "0",
                       "skipped": "0", "not-run": "0", "total": "2", "not-judged": "0"}, outputs


def test_runner_objects_bring_their_own_python_and_a_gpu_runner_on_the_cpu_fails(
        act: str, repo: Path, tmp_path: Path, torch_python: str) -> None:
    # the workflow's own `python` does not exist: each runner runs only because its entry gives its own;
    # `linux-gpu` names a GPU, yet its checks ran on this machine's CPU: its job passes, the merged verdict fails
    runners = [{"labels": ["ubuntu-latest"], "python": torch_python, "device": "cpu"},
               {"labels": ["linux-gpu"], "python": torch_python}]
    run = run_act(act, "call-reusable.yml",
                  {"python": "python-that-is-not-here", "suite": "mlp[float32]/numerics", "runners": json.dumps(runners)},
                  tmp=tmp_path, repo=repo, platforms=("ubuntu-latest", "linux-gpu"))
    assert run.job("check on ubuntu-latest") == "success", run.explain()
    assert run.job("check on linux-gpu") == "success", run.explain()
    assert run.job("combined summary") == "failure", run.explain()
    assert "the merged verdict failed" in run.text("combined summary")
    statuses = [json.loads(p.read_text()) for p in run.artifacts.glob("torch-upgrade-check-report-*/runner-status.json")]
    assert sorted((s["runner"], s["device"], s["runner_device"], s["report"]) for s in statuses) == [
        (["linux-gpu"], "cpu", "", True), (["ubuntu-latest"], "cpu", "cpu", True)], statuses
    (combined,) = run.summaries("combined summary")
    assert "runner\\-device" in combined and "runner \\(linux\\-gpu\\) is meant for a GPU" in combined, combined
    merged = run.step_outputs("combined summary", "Merge the reports into one summary")
    assert (merged["verdict"], merged["passed"], merged["failed"]) == ("failed", "2", "1"), merged


def test_matrix_fails_when_a_runner_crosses_a_threshold(act: str, repo: Path, tmp_path: Path,
                                                        torch_python: str) -> None:
    run = run_act(act, "call-reusable.yml",
                  {"python": torch_python, "suite": LATENCY_CHECK, "max-latency-ms": IMPOSSIBLE_LIMIT,
                   "runners": '[["ubuntu-latest"]]'},
                  tmp=tmp_path, repo=repo)
    assert run.job("check on ubuntu-latest") == "failure", run.explain()
    assert run.job("combined summary") == "failure", run.explain()
    assert "at least one runner's check did not pass" in run.text("combined summary")
    (combined,) = run.summaries("combined summary")
    assert "failed" in combined and "matmul" in combined
    merged = run.step_outputs("combined summary", "Merge the reports into one summary")  # the workflow's outputs
    assert (merged["verdict"], merged["failed"]) == ("failed", "1"), merged


def test_a_runner_without_a_report_is_an_error_run_and_a_rerun_replaces_its_artifacts(
        act: str, repo: Path, tmp_path: Path, torch_python: str) -> None:
    inputs = {"python": torch_python, "suite": "mlp[float32]/numerics", "runners": '[["ubuntu-latest"]]'}
    # first attempt: a bad input stops the runner's job before any report exists
    run = run_act(act, "call-reusable.yml", {**inputs, "rtol": "abc"}, tmp=tmp_path, repo=repo)
    assert run.job("check on ubuntu-latest") == "failure", run.explain()
    assert run.job("combined summary") == "failure", run.explain()
    (uploaded,) = run.artifacts.glob("torch-upgrade-check-report-*-ubuntu-latest")  # act leaves the index empty
    assert not (uploaded / "report.json").exists()
    status = json.loads((uploaded / "runner-status.json").read_text())
    assert (status["job_status"], status["steps"]["check"], status["verdict"], status["report"]) == (
        "failure", "failure", "error", False), status
    (combined,) = run.summaries("combined summary")
    assert combined.startswith("## 💥 error\\: the run on cpu \\(ubuntu\\-latest\\) could not happen"), combined
    assert "a bad input or config" in combined and "### 💥 Runs that could not happen" in combined
    junit = (run.artifacts / "torch-upgrade-check-merged" / "junit.xml").read_text()
    assert 'type="infrastructure"' in junit and "no report from this runner" in junit
    merged = run.step_outputs("combined summary", "Merge the reports into one summary")  # the workflow's outputs
    assert merged["verdict"] == "error" and merged["total"] == "0", merged
    assert ("error", "torch-upgrade-check: input 'rtol'") in [a[:2] for a in run.annotations("check on")]

    # "Re-run failed jobs": the same run's artifacts are there already; the uploads must replace them
    rerun = run_act(act, "call-reusable.yml", inputs, tmp=tmp_path, repo=repo)
    assert rerun.job("check on ubuntu-latest") == "success", rerun.explain()
    assert rerun.job("combined summary") == "success", rerun.explain()
    assert (uploaded / "report.json").is_file()
    assert json.loads((uploaded / "runner-status.json").read_text())["report"] is True
    assert (run.artifacts / "torch-upgrade-check-merged" / "summary.md").read_text().startswith("## ✅ passed")
    assert "reusable-workflow verdict=passed result=success" in rerun.text("report the verdict")


def test_torch_missing_is_an_infrastructure_error_even_with_fail_on_none(act: str, repo: Path, tmp_path: Path) -> None:
    bare = tmp_path / "bare-venv"
    venv.create(bare, with_pip=False)
    # the old input name `suite` (an alias of `checks` through v1): it still selects, and warns once
    run = run_act(act, "run-action.yml", {"python": str(bare / "bin" / "python"), "fail-on": "none",
                                          "deprecated-suite": "mlp[float32]/numerics"}, tmp=tmp_path / "act", repo=repo)
    assert run.job("check") == "failure", run.explain()
    assert "--only 'mlp[float32]/numerics'" in run.text(), run.explain()
    assert run.text().count("warning: input 'suite' is deprecated") == 1, run.explain()
    assert run.outputs()["verdict"] == "error"
    (summary,) = run.summaries("check")
    assert "could not happen" in summary and "torch" in summary, summary
    assert "torch-upgrade-check: failing the step: an infrastructure error" in run.text()
    assert (run.out / "report" / "report.json").is_file()
