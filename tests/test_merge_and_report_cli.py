"""The action's contract, part two: `merge` and `report` on saved reports, through cli.main as the workflow runs
them, read back as GitHub would: exit code, GITHUB_OUTPUT, step summary, annotations, JUnit. Fast, no torch.

Also: a runner job that left no report (its runner-status.json says so, or it left nothing) is an error run
in every renderer; a bad flag or file stops with an annotation and `verdict=error`; an install failure shows
the tail of the install log inline."""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from github_runner import read_github_output

from torch_upgrade_check import cli
from torch_upgrade_check.commands import common, merge
from torch_upgrade_check.commands import report as report_command
from torch_upgrade_check.model import CheckResult, Outcome, Report
from torch_upgrade_check.schema import read_reports, write_reports

COUNTS = ("passed", "suspicious", "shared-failures", "failed", "errors", "skipped", "not-run", "total", "not-judged")


def result(aspect: str, outcome: Outcome = Outcome.PASSED, workload: str = "mlp", **fields: object) -> CheckResult:
    return CheckResult(workload, aspect, "cpu", "float32", outcome, reason=f"{workload} {aspect} {outcome.value}",
                       **fields)  # type: ignore[arg-type]


def report(*results: CheckResult, device: str = "cpu", label: str = "2.13.0+cpu", role: str = "",
           infra_error: str = "") -> Report:
    return Report(tool_version="1.0.0", device=device, requested_device=device, label=label,
                  command=["torch-upgrade-check", "run"], started="2026-01-01T00:00:00+00:00",
                  finished="2026-01-01T00:01:00+00:00", complete=True, results=results, role=role,
                  infra_error=infra_error, environment={"torch_version": label})


def saved(tmp_path: Path, name: str, *reports: Report) -> str:
    path = tmp_path / name / "report.json"
    write_reports(list(reports), path)
    return str(path)


def status(tmp_path: Path, name: str, **fields: object) -> str:
    doc = {"kind": merge.STATUS_KIND, "schema_version": 1, "runner": ["self-hosted", "linux", "cuda"],
           "index": 0, "job_status": "failure", "steps": {"guard": "success", "caller": "success", "self": "success",
                                                          "check": "failure"},
           "verdict": "error", "report": False, "device": "cuda", "timeout_minutes": 120, **fields}
    path = tmp_path / name / merge.STATUS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2))
    return str(path)


class GitHub:
    """GITHUB_OUTPUT, GITHUB_STEP_SUMMARY and GITHUB_ACTIONS for one cli.main call, read back afterwards."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.output, self.summary_file = tmp_path / "github_output", tmp_path / "step_summary.md"
        self.output.write_text("")
        monkeypatch.setenv("GITHUB_OUTPUT", str(self.output))
        monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(self.summary_file))
        monkeypatch.setenv("GITHUB_ACTIONS", "true")

    def outputs(self) -> dict[str, str]:
        return read_github_output(self.output.read_text())

    def summary(self) -> str:
        return self.summary_file.read_text() if self.summary_file.exists() else ""


@pytest.fixture
def gh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> GitHub:
    return GitHub(tmp_path, monkeypatch)


def counts(outputs: dict[str, str]) -> dict[str, int]:
    return {k: int(outputs[k]) for k in COUNTS}


def test_merge_of_passing_runners_passes(tmp_path: Path, gh: GitHub) -> None:
    a = saved(tmp_path, "a", report(result("numerics"), result("latency")))
    b = saved(tmp_path, "b", report(result("numerics"), device="cuda", label="2.13.0+cu128"))
    assert cli.main(["merge", a, b, "--out", str(tmp_path / "merged")]) == 0
    out = gh.outputs()
    assert out["verdict"] == "passed" and counts(out) == {**dict.fromkeys(COUNTS, 0), "passed": 3, "total": 3}
    assert out["summary"] == str((tmp_path / "merged" / "summary.md").resolve()) and out["report"] == ""
    assert gh.summary().startswith("## ✅ passed\\: 3 checks on cpu\\, cuda\n")
    assert (tmp_path / "merged" / "summary.md").read_text() == gh.summary()
    suites = ET.parse(tmp_path / "merged" / "junit.xml").getroot().findall("testsuite")
    assert len(suites) == 2


def test_merge_fails_when_one_runner_crosses_a_threshold(tmp_path: Path, gh: GitHub,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    a = saved(tmp_path, "a", report(result("numerics")))
    b = saved(tmp_path, "b", report(result("latency", Outcome.FAILED), device="cuda"))
    assert cli.main(["merge", a, b, "--out", str(tmp_path / "m")]) == 1
    out = gh.outputs()
    assert out["verdict"] == "failed" and out["failed"] == "1" and out["total"] == "2"
    assert gh.summary().startswith("## ❌ failed\\: 1 latency failure")
    annotations = [line for line in capsys.readouterr().out.splitlines() if line.startswith("::")]
    assert annotations == ["::error title=mlp[float32]/latency failed on cuda 2.13.0+cpu::mlp latency failed"]


def test_merge_of_comparisons_leaves_the_baselines_out(tmp_path: Path, gh: GitHub) -> None:
    compared = saved(tmp_path, "a", report(result("numerics", Outcome.FAILED), role="baseline"),
                     report(result("numerics"), role="candidate", label="2.14.0+cpu"))
    assert cli.main(["merge", compared, "--out", str(tmp_path / "m")]) == 0
    out = gh.outputs()
    assert out["verdict"] == "passed" and out["failed"] == "0" and out["total"] == "1"


def test_a_runner_without_a_report_is_an_error_run_in_every_renderer(tmp_path: Path, gh: GitHub,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    ok = saved(tmp_path, "a", report(result("numerics")))
    (tmp_path / "a" / merge.STATUS_FILE).write_text(json.dumps({
        "kind": merge.STATUS_KIND, "schema_version": 1, "runner": "ubuntu-latest", "index": 0,
        "job_status": "success", "steps": {"check": "success"}, "verdict": "passed", "report": True}))
    bad = status(tmp_path, "b", index=1)
    code = cli.main(["merge", ok, "--runner-status", str(tmp_path / "a" / merge.STATUS_FILE),
                     "--runner-status", bad, "--runners", '[["ubuntu-latest"], ["self-hosted", "linux", "cuda"]]',
                     "--out", str(tmp_path / "m")])
    assert code == 3
    out = gh.outputs()
    assert out["verdict"] == "error" and out["passed"] == "1" and out["total"] == "1"
    summary = gh.summary()
    assert summary.startswith("## 💥 error\\: the run on cuda \\(self\\-hosted\\, linux\\, cuda\\) could not happen")
    assert "a bad input or config" in summary and "### 💥 Runs that could not happen" in summary
    (error,) = ET.parse(tmp_path / "m" / "junit.xml").getroot().iter("error")
    assert error.get("type") == "infrastructure" and "the job's annotations say which" in error.get("message", "")
    annotations = [line for line in capsys.readouterr().out.splitlines() if line.startswith("::error")]
    assert annotations == [
        "::error title=torch-upgrade-check could not run on cuda (self-hosted%2C linux%2C cuda)::no report from this "
        f"runner: {merge.why(merge.read_status(Path(bad)))}"]


def test_a_runner_that_left_nothing_is_an_error_run_too(tmp_path: Path, gh: GitHub) -> None:
    ok = saved(tmp_path, "a", report(result("numerics")))
    first = status(tmp_path, "a", index=0, job_status="success", verdict="passed", report=True,
                   steps={"check": "success"}, runner=["ubuntu-latest"])
    assert cli.main(["merge", ok, "--runner-status", first, "--runners", '["ubuntu-latest", ["macOS", "ARM64"]]',
                     "--out", str(tmp_path / "m")]) == 3
    assert gh.outputs()["verdict"] == "error"
    assert "auto \\(macOS\\, ARM64\\)" in gh.summary() and "left no report and no status" in gh.summary()


def test_only_failed_runners_without_reports_error_a_merge(tmp_path: Path, gh: GitHub) -> None:
    # a status that says its report exists adds nothing: the report itself speaks
    ok = saved(tmp_path, "a", report(result("numerics"), device="cuda"))
    mine = status(tmp_path, "a", job_status="success", verdict="passed", report=True, steps={"check": "success"})
    assert cli.main(["merge", ok, "--runner-status", mine, "--runners", '[["self-hosted", "linux", "cuda"]]',
                     "--out", str(tmp_path / "m")]) == 0
    assert gh.outputs()["verdict"] == "passed"


def test_a_gpu_runner_whose_checks_ran_on_the_cpu_fails_the_merge(tmp_path: Path, gh: GitHub,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    # labelled for a GPU (`cuda` among its labels), yet torch saw none and the checks ran on the CPU: each job
    # passed on its own, the merge fails naming the runner and why it counts as a GPU runner
    gpu = saved(tmp_path, "gpu", report(result("numerics")))
    gpu_status = status(tmp_path, "gpu", job_status="success", verdict="passed", report=True, device="auto",
                        steps={"check": "success"})
    cpu = saved(tmp_path, "cpu", report(result("numerics")))
    cpu_status = status(tmp_path, "cpu", index=1, job_status="success", verdict="passed", report=True,
                        device="auto", steps={"check": "success"}, runner=["ubuntu-latest"])
    argv = ["merge", gpu, cpu, "--runner-status", gpu_status, "--runner-status", cpu_status,
            "--runners", '[["self-hosted", "linux", "cuda"], "ubuntu-latest"]', "--out", str(tmp_path / "m")]
    assert cli.main(argv) == 1
    out = gh.outputs()
    assert out["verdict"] == "failed" and (out["passed"], out["failed"], out["total"]) == ("2", "1", "3"), out
    failure = "runner (self-hosted, linux, cuda) is meant for a GPU (its label 'cuda') but its checks ran on the CPU"
    assert gh.summary().startswith("## ❌ failed\\: 1 runner\\-device failure")
    assert "environment\\[\\-\\]\\/runner\\-device" in gh.summary() and "its label \\'cuda\\'" in gh.summary()
    annotations = [line for line in capsys.readouterr().out.splitlines() if line.startswith("::error")]
    assert len(annotations) == 1 and failure in annotations[0], annotations
    # fail-on none: reported, exit 0, as the runners' own jobs decided
    assert cli.main([*argv[:-2], "--fail-on", "none", "--out", str(tmp_path / "m2")]) == 0
    # an entry's own device cpu says the CPU is meant; and a GPU runner that ran on cuda passes
    cpu_meant = status(tmp_path, "gpu", job_status="success", verdict="passed", report=True, device="cpu",
                       runner_device="cpu", steps={"check": "success"})
    assert cli.main(["merge", gpu, "--runner-status", cpu_meant, "--out", str(tmp_path / "m3")]) == 0
    on_cuda = saved(tmp_path, "cuda", report(result("numerics"), device="cuda"))
    cuda_status = status(tmp_path, "cuda", job_status="success", verdict="passed", report=True,
                         runner=["self-hosted", "nvidia_a100"], steps={"check": "success"})
    assert cli.main(["merge", on_cuda, "--runner-status", cuda_status, "--out", str(tmp_path / "m4")]) == 0


def test_report_rerenders_and_exits_by_the_verdict(tmp_path: Path, gh: GitHub) -> None:
    for results, infra_error, code, verdict in (((result("numerics"),), "", 0, "passed"),
                                                ((result("memory", Outcome.FAILED),), "", 1, "failed"),
                                                ((), "cannot import torch", 3, "error")):
        path = saved(tmp_path, verdict, report(*results, infra_error=infra_error))
        junit, summary = tmp_path / verdict / "j.xml", tmp_path / verdict / "s.md"
        assert cli.main(["report", path, "--junit", str(junit), "--summary", str(summary)]) == code
        out = gh.outputs()
        assert out["verdict"] == verdict and out["report"] == str(Path(path).resolve())
        assert out["junit"] == str(junit.resolve()) and junit.is_file() and summary.is_file()
        assert read_reports(Path(path))[0].results == results  # report only reads report.json


@pytest.mark.parametrize(("argv", "title", "problem"), [
    (["run", "--rtol", "abc"], "torch-upgrade-check%3A --rtol",
     "--rtol must be a number ≥ 0 like 1e-4 (0 turns that part of the tolerance off), got 'abc'"),
    (["report", "missing/report.json"], "torch-upgrade-check%3A bad input or config",
     "cannot read report missing/report.json: No such file or directory; check the path"),
    (["merge"], "torch-upgrade-check%3A bad input or config",
     "merge needs report.json files (or --runner-status FILE / --runners JSON); got none"),
    (["merge", "--runners", "ubuntu-latest"], "torch-upgrade-check%3A --runners",
     "--runners must be a JSON list of runner label sets like '[[\"self-hosted\", \"cuda\"], [\"ubuntu-latest\"]]' "
     "or objects like '{\"labels\": [\"self-hosted\", \"gpu\"], \"device\": \"cuda\", \"python\": \"python3.12\"}', "
     "got 'ubuntu-latest'"),
])
def test_a_bad_flag_or_file_is_an_annotation_and_verdict_error(argv: list[str], title: str, problem: str,
                                                                tmp_path: Path, gh: GitHub, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.err == f"torch-upgrade-check: error: {problem}\n"
    assert [line for line in captured.out.splitlines() if line.startswith("::")] == [
        f"::error title={title}::{problem}"]
    assert gh.outputs() == {"verdict": "error", **dict.fromkeys(COUNTS, "0"), "report": "", "junit": "", "summary": ""}


def test_a_bad_runner_status_names_the_file(tmp_path: Path, gh: GitHub, capsys: pytest.CaptureFixture[str]) -> None:
    wrong = status(tmp_path, "x", schema_version=2)
    assert cli.main(["merge", "--runner-status", wrong]) == 2
    assert f"{wrong} has schema_version 2; this torch-upgrade-check reads version 1" in capsys.readouterr().err
    assert gh.outputs()["verdict"] == "error"


def test_a_crash_of_ours_is_exit_3_not_1(tmp_path: Path, gh: GitHub, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    def boom(settings: object) -> int:
        raise KeyError("oops")

    monkeypatch.setattr(report_command, "execute", boom)
    assert cli.main(["report", "r.json"]) == 3
    err = capsys.readouterr().err
    assert "Traceback" in err and "torch-upgrade-check: internal error: 'oops' (KeyError); please report it" in err
    assert gh.outputs()["verdict"] == "error"


def test_an_install_failure_shows_the_install_log_tail_inline(tmp_path: Path, gh: GitHub,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    log = out / "logs" / "install-candidate.log"
    log.parent.mkdir(parents=True)
    log.write_text("".join(f"line {i}\n" for i in range(100)) + "ERROR: No matching distribution found for torch==9.9\n")
    (out / "logs" / "install-baseline.log").write_text("Successfully installed torch-2.13.0\n")
    message = f"installing torch==9.9 failed: ERROR: No matching distribution found for torch==9.9 (full log: {log})"
    assert common.infra(common.Output(out), [report(role="candidate")], message) == 3
    (written,) = read_reports(out / "report.json")
    tail = "\n".join(f"line {i}" for i in range(71, 100)) + "\nERROR: No matching distribution found for torch==9.9"
    assert written.infra_error == f"{message}\nlast 30 lines of {log}:\n{tail}"
    assert "Successfully installed" not in written.infra_error  # only the log the failure names
    assert capsys.readouterr().err == f"torch-upgrade-check: infrastructure error: {written.infra_error}\n"
    assert gh.outputs()["verdict"] == "error" and "line 99" in gh.summary()
