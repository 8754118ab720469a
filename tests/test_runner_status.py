"""merge's runner status (commands/merge.py): what a check job of the reusable workflow left behind, and why it left no
report (no torch)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from torch_upgrade_check.commands import merge
from torch_upgrade_check.commands.merge import NO_STATUS, RunnerStatus, missing_reports, read_status, why
from torch_upgrade_check.errors import UsageError
from torch_upgrade_check.model import Verdict
from torch_upgrade_check.schema import SchemaError

OK = {"guard": "success", "caller": "success", "self": "success", "check": "success"}


def st(job_status: str = "failure", verdict: str = "", report: bool = False, index: int = 0, **steps: str) -> RunnerStatus:
    return RunnerStatus(("self-hosted", "cuda"), index, job_status, {**OK, **steps}, verdict, report, "cuda", 120)


@pytest.mark.parametrize(("status", "reason"), [
    (st(check="failure", verdict="error"), "torch-upgrade-check stopped before any check ran: a bad input or config"),
    (st(check="failure"), "the job failed while running torch-upgrade-check and wrote no report"),
    (st(self="failure", check="skipped"),
     "the job failed while checking out torch-upgrade-check (a private copy needs the action-token secret)"),
    (st(guard="failure", caller="skipped", self="skipped", check="skipped"),
     "the job failed while checking that the workflow knows its own repository and commit"),
    (st(caller="failure", self="skipped", check="skipped"), "the job failed while checking out your repository"),
    (st("cancelled", check="cancelled"), "the job was cancelled or ran past timeout-minutes (120)"),
    (st("failure"), "the job ended (failure) without a report"),
])
def test_why_names_the_step_where_the_job_stopped(status: RunnerStatus, reason: str) -> None:
    assert why(status).startswith(reason), why(status)


def test_missing_reports_are_errors_in_runner_order() -> None:
    statuses = [st(index=2, check="failure", verdict="error"), st("success", "passed", True, index=0)]
    reports = missing_reports(statuses, [("ubuntu-latest",), ("macOS", "ARM64"), ("self-hosted", "cuda")])
    assert [(r.label, r.device) for r in reports] == [("(macOS, ARM64)", "auto"), ("(self-hosted, cuda)", "cuda")]
    assert reports[0].infra_error == f"no report from this runner: {NO_STATUS}"
    assert reports[1].infra_error == f"no report from this runner: {why(statuses[0])}"
    assert all(r.verdict() is Verdict.ERROR and r.environment["runner"] for r in reports)
    assert missing_reports(statuses) == reports[1:]  # without --runners only the statuses speak


def test_statuses_without_a_position_claim_runners_by_their_labels() -> None:
    # act leaves strategy.job-index empty: the first unclaimed runner with the same labels is the one
    first, second = (RunnerStatus(("gpu",), None, "failure", {"check": "failure"}, "error") for _ in range(2))
    reports = missing_reports([first, second], [("gpu",), ("cpu",), ("gpu",)])
    assert [(r.label, r.infra_error == f"no report from this runner: {NO_STATUS}") for r in reports] == [
        ("(gpu)", False), ("(cpu)", True), ("(gpu)", False)]
    assert missing_reports([RunnerStatus(("gpu",), None, "success", report=True)], [("gpu",)]) == []


def _write(tmp_path: Path, doc: object) -> Path:
    path = tmp_path / "runner-status.json"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


GOOD = {"kind": merge.STATUS_KIND, "schema_version": 1, "runner": ["self-hosted", "cuda"], "index": 1,
        "job_status": "failure", "steps": {"check": "failure"}, "verdict": "error", "report": False, "device": "cuda",
        "timeout_minutes": 90}


def test_reads_what_the_workflow_writes(tmp_path: Path) -> None:
    assert read_status(_write(tmp_path, GOOD)) == RunnerStatus(("self-hosted", "cuda"), 1, "failure",
                                                               {"check": "failure"}, "error", False, "cuda", 90)
    minimal = {k: GOOD[k] for k in ("kind", "schema_version", "index")} | {"runner": "ubuntu-latest"}
    assert read_status(_write(tmp_path, minimal)) == RunnerStatus(("ubuntu-latest",), 1, "")


@pytest.mark.parametrize(("doc", "problem"), [
    ("{", "is not JSON"),
    ({"kind": "torch-upgrade-check/report"}, "is not a torch-upgrade-check runner status"),
    ({**GOOD, "schema_version": 2}, "has schema_version 2; this torch-upgrade-check reads version 1"),
    ({**GOOD, "runner": 3}, "is malformed (a runner must be a label or a list of labels, got 3)"),
    ({**GOOD, "index": "first"}, "is malformed"),
])
def test_a_file_it_cannot_read_is_a_schema_error_naming_it(tmp_path: Path, doc: object, problem: str) -> None:
    path = _write(tmp_path, doc)
    with pytest.raises(SchemaError) as e:
        read_status(path)
    assert str(e.value).startswith(str(path)) or str(e.value).startswith(f"runner status {path}"), e.value
    assert problem in str(e.value)


@pytest.mark.parametrize(("text", "runners"), [
    ('[["self-hosted", "cuda"], "ubuntu-latest"]', [("self-hosted", "cuda"), ("ubuntu-latest",)]), ("[]", []),
    ('[{"labels": ["self-hosted", "gpu"], "device": "cuda", "python": "python3.12"}, {"labels": "macos-14"}]',
     [("self-hosted", "gpu"), ("macos-14",)]),
])
def test_parse_runners(text: str, runners: list[tuple[str, ...]]) -> None:
    assert merge.parse_runners(text) == runners


@pytest.mark.parametrize("text", ["ubuntu-latest", "{}", "[[]]", "[[1]]", "[null]"])
def test_bad_runners_is_one_sentence(text: str) -> None:
    with pytest.raises(UsageError) as e:
        merge.parse_runners(text)
    assert e.value.problems[0].startswith("--runners must be a JSON list of runner label sets") and repr(text) in str(e.value)


@pytest.mark.parametrize(("entry", "problem"), [
    ('{"device": "cuda"}', "a runner object needs 'labels'"),
    ('{"labels": ["gpu"], "devices": "cuda"}', "a runner object needs 'labels'"),
    ('{"labels": ["gpu"], "device": "rocm"}', "a runner's device must be one of auto, cpu, cuda, mps"),
    ('{"labels": ["gpu"], "python": 3}', "a runner's python must be a string"),
])
def test_a_bad_runner_object_says_what_is_wrong(entry: str, problem: str) -> None:
    with pytest.raises(UsageError) as e:
        merge.parse_runners(f"[{entry}]")
    assert problem in e.value.problems[0] and e.value.problems[0].startswith("--runners must be a JSON list")


@pytest.mark.parametrize(("runner", "runner_device", "because"), [
    (("self-hosted", "linux", "gpu"), "", "its label 'gpu'"),
    (("self-hosted", "Linux-CUDA"), "", "its label 'Linux-CUDA'"),
    (("self-hosted", "nvidia_a100"), "auto", "its label 'nvidia_a100'"),
    (("self-hosted", "macOS", "mps"), "", "its label 'mps'"),
    (("self-hosted", "macOS", "ARM64"), "mps", "its runners entry asks for device mps"),
    (("ubuntu-latest",), "cuda", "its runners entry asks for device cuda"),
    (("self-hosted", "gpu"), "cpu", ""),  # the entry says the CPU is meant
    (("self-hosted", "macOS", "ARM64"), "", ""),  # no label names a GPU: say "device": "mps" to mean one
    (("gpuless-box",), "", ""),  # a word, not a substring
])
def test_which_runners_are_meant_for_a_gpu(runner: tuple[str, ...], runner_device: str, because: str) -> None:
    assert merge.gpu_runner(RunnerStatus(runner, 0, "success", runner_device=runner_device)) == because


def test_a_gpu_runner_whose_checks_ran_on_the_cpu_gets_a_failing_check() -> None:
    from torch_upgrade_check.model import CheckResult, Outcome, Report

    passed = CheckResult("mlp", "numerics", "cpu", "float32", Outcome.PASSED)
    ran = Report("1.0.0", "cpu", "auto", "2.13.0+cpu", [], "", results=(passed,), role="candidate")
    gpu = RunnerStatus(("self-hosted", "gpu"), 0, "success", report=True)
    judged = merge.on_the_cpu(gpu, ran)
    assert judged.verdict() is Verdict.FAILED and judged.results[0] == passed
    (failure,) = [r for r in judged.results if r.outcome is Outcome.FAILED]
    assert failure.id == "environment[-]/runner-device" and failure.fail_kind == "correctness"
    assert failure.reason.startswith("runner (self-hosted, gpu) is meant for a GPU (its label 'gpu') but its checks "
                                     "ran on the CPU (device auto)")
    # on the accelerator, a baseline (its candidate carries it), a run that could not happen: unchanged
    for report in (Report("1.0.0", "cuda", "auto", "x", [], "", results=(passed,)),
                   Report("1.0.0", "cpu", "auto", "x", [], "", results=(passed,), role="baseline"),
                   Report("1.0.0", "cpu", "auto", "x", [], "", infra_error="no torch")):
        assert merge.on_the_cpu(gpu, report) == report
    cpu = RunnerStatus(("ubuntu-latest",), 0, "success", report=True)
    assert merge.on_the_cpu(cpu, ran) == ran
