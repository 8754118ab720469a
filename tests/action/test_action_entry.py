"""action_entry and action/: inputs from env -> one-line problems (exit 2) or the CLI command; fast, no act, no torch."""

from __future__ import annotations

import contextlib
import io
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from torch_upgrade_check import github
from torch_upgrade_check.action import argv as action_argv
from torch_upgrade_check.action import bisect as action_bisect
from torch_upgrade_check.action import inputs as action_inputs
from torch_upgrade_check.action.argv import bisect_argv, plan
from torch_upgrade_check.action.inputs import alias_notes, env_name, read_inputs
from torch_upgrade_check.action.steps import upload_plan
from torch_upgrade_check.action_entry import main


def _env(**inputs: str) -> dict[str, str]:
    return {env_name(name.replace("_", "-")): value for name, value in inputs.items()}


def test_no_torch_version_runs_the_installed_torch_with_run() -> None:
    p = plan(_env(python="/opt/py/bin/python", checks="mlp, latency\nflex*", max_latency_ms="mlp=25\n sdpa = 3"))
    assert p.problems == ()
    assert p.argv == ("run", "--python", "/opt/py/bin/python", "--device", "auto", "--out", "torch-upgrade-check-report",
                      "--only", "mlp", "--only", "latency", "--only", "flex*",
                      "--max-latency-ms", "mlp=25", "--max-latency-ms", "sdpa=3",
                      "--fail-on", "correctness,latency,memory")


def test_versions_run_compare_with_every_install_option() -> None:
    p = plan(_env(candidate_torch_version="2.13.0", baseline_torch_version="current", torch_backend="cu128",
                  index_url="https://download.pytorch.org/whl/cu128", extra_index_url="https://a.example/simple\n",
                  find_links=".", extra_requirements="numpy>=1.26,<3\n# a comment\nscipy",
                  max_latency_regression="15%", max_memory_regression="0.25", rtol="1e-4", atol="1e-5",
                  check_timeout_seconds="900", device="cuda", fail_on="correctness, latency", job_summary="false",
                  report_dir="reports/torch"))
    assert p.problems == ()
    assert p.argv == ("compare", "--candidate", "2.13.0", "--baseline", "current", "--python", "python3",
                      "--torch-backend", "cu128", "--index-url", "https://download.pytorch.org/whl/cu128",
                      "--extra-index-url", "https://a.example/simple", "--find-links", ".",
                      "--extra-requirement", "numpy>=1.26,<3", "--extra-requirement", "scipy",
                      "--max-latency-regression", "15%", "--max-memory-regression", "0.25",
                      "--device", "cuda", "--out", "reports/torch", "--rtol", "1e-4", "--atol", "1e-5",
                      "--timeout", "900", "--fail-on", "correctness,latency", "--no-job-summary")
    assert p.fail_on == ("correctness", "latency")


def test_compile_time_reaches_compare_with_its_threshold() -> None:
    p = plan(_env(candidate_torch_version="2.13.0", baseline_torch_version="2.12.1", compile_time="true",
                  max_compile_time_regression="40%"))
    assert p.problems == ()
    assert ("--max-compile-time-regression", "40%") == p.argv[p.argv.index("--max-compile-time-regression"):][:2]
    assert "--compile-time" in p.argv and "--compile-time" not in plan(_env(candidate_torch_version="2.13.0")).argv


def test_ddp_and_scan_reach_compare_and_bisect_gets_ddp_only(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "train.py").write_text("import torch\n")
    values = _env(candidate_torch_version="2.13.0", baseline_torch_version="2.12.1", ddp="true",
                  scan="src\ntrain.py", working_directory=str(tmp_path))
    p = plan(values)
    assert p.problems == ()
    assert "--ddp" in p.argv and p.argv[p.argv.index("--scan"):][:4] == ("--scan", "src", "--scan", "train.py")
    bisect = bisect_argv(read_inputs(values), "2.13.0", ["transformer_block[float32]/ddp"])
    assert "--ddp" in bisect and "--scan" not in bisect  # bisect has no --scan: it would exit 2
    plain = plan(_env(candidate_torch_version="2.13.0")).argv
    assert "--ddp" not in plain and "--scan" not in plain
    missing = plan(_env(scan="src\nlib", working_directory=str(tmp_path))).problems
    assert missing == (f"input 'scan' must be Python files or folders (relative to 'working-directory'), got 'lib': "
                       f"not found in {tmp_path.resolve()}",)


def test_ab_budget_undecided_and_threads_reach_the_cli() -> None:
    p = plan(_env(candidate_torch_version="2.13.0", baseline_torch_version="2.12.1", ab_budget="60", undecided="Pass",
                  threads="1"))
    assert p.problems == ()
    assert ("--ab-budget", "60", "--undecided", "pass") == p.argv[p.argv.index("--ab-budget"):][:4]
    assert ("--threads", "1") == p.argv[p.argv.index("--threads"):][:2]
    assert plan(_env(threads="2")).argv[:1] == ("run",) and "--threads" in plan(_env(threads="2")).argv


def test_fail_on_shared_failures_reaches_compare_only_when_set() -> None:
    versions = {"candidate_torch_version": "2.13.0", "baseline_torch_version": "2.12.1"}
    assert "--fail-on-shared-failures" in plan(_env(**versions, fail_on_shared_failures="True")).argv
    assert "--no-fail-on-shared-failures" in plan(_env(**versions, fail_on_shared_failures="false")).argv
    unset = plan(_env(**versions)).argv  # '': the config's key decides, else false
    assert not any("shared" in a for a in unset)
    bisect = bisect_argv(read_inputs(_env(**versions, fail_on_shared_failures="true")), "2.13.0", ["mlp[float32]/*"])
    assert not any("shared" in a for a in bisect)  # not a bisect flag


def test_baseline_alone_compares_with_the_installed_torch_as_candidate() -> None:
    assert plan(_env(baseline_torch_version="2.12.1")).argv[:5] == ("compare", "--candidate", "current",
                                                                     "--baseline", "2.12.1")


def test_the_stack_and_auto_pins_reach_compare() -> None:
    p = plan(_env(candidate_torch_version="auto", baseline_torch_version="auto", requirements="requirements.txt\npyproject.toml",
                  extras="serve, test"))
    assert p.problems == ()
    assert p.argv[:7] == ("compare", "--candidate", "auto", "--baseline", "auto", "--base-ref", "HEAD^1")
    assert p.argv[p.argv.index("--requirements"):][:6] == ("--requirements", "requirements.txt", "--requirements",
                                                            "pyproject.toml", "--extras", "serve,test")
    assert ("--base-ref", "origin/main") == plan(_env(candidate_torch_version="auto", baseline_torch_version="auto",
                                                      base_ref="origin/main")).argv[5:7]
    assert plan(_env(candidate_torch_version="2.13.0", base_ref="main")).problems == (
        "input 'base-ref' names the commit of the baseline's stack (and, with 'baseline-torch-version: auto', its torch "
        "pin); set 'baseline-torch-version', or remove 'base-ref'",)


def test_base_ref_with_a_fixed_baseline_reads_the_baselines_stack_there() -> None:
    # a pull request that bumps torch and torchvision together: the baseline's stack is the base branch's files
    p = plan(_env(candidate_torch_version="2.14.1", baseline_torch_version="2.13.0", base_ref="origin/main",
                  requirements="requirements.txt"))
    assert p.problems == ()
    assert p.argv[:7] == ("compare", "--candidate", "2.14.1", "--baseline", "2.13.0", "--base-ref", "origin/main")
    fixed = plan(_env(candidate_torch_version="2.14.1", baseline_torch_version="2.13.0"))
    assert "--base-ref" not in fixed.argv  # no base-ref: both sides read the working tree's stack, as before


def test_fail_on_none_reaches_the_cli() -> None:
    p = plan(_env(fail_on="none"))
    assert p.argv[-2:] == ("--fail-on", "none") and p.fail_on == ()


def test_fleet_reaches_the_cli() -> None:
    p = plan(_env(fleet="sm_80, sm_90, driver=535.104.05"))
    assert p.problems == () and p.argv[p.argv.index("--fleet") + 1] == "sm_80, sm_90, driver=535.104.05"
    assert "--fleet" not in plan(_env()).argv


def test_config_is_relative_to_the_working_directory(tmp_path: Path) -> None:
    (tmp_path / "cfg.yml").write_text("version: 1\n")
    p = plan(_env(working_directory=str(tmp_path), config="cfg.yml"))
    assert p.problems == () and p.cwd == tmp_path and p.argv[p.argv.index("--config") + 1] == "cfg.yml"
    assert "input 'config' must be a file" in plan(_env(working_directory=str(tmp_path), config="nope.yml")).problems[0]


@pytest.mark.parametrize(("inputs", "message"), [
    ({"candidate_torch_version": "2.x"}, "input 'candidate-torch-version' must be a torch version like 2.13.0"),
    ({"baseline_torch_version": "newest"}, "input 'baseline-torch-version' must be a torch version"),
    ({"candidate_torch_version": "2.13.0", "torch_backend": "cuda12"}, "input 'torch-backend' must be auto, pypi, cpu"),
    ({"candidate_torch_version": "2.13.0", "index_url": "pypi.example.com"}, "input 'index-url' must be one URL"),
    ({"device": "tpu"}, "input 'device' must be one of auto, cpu, cuda, mps, got 'tpu'"),
    ({"fleet": "ampere, hopper"}, "input 'fleet' must list GPU architectures, the oldest driver and the smallest card's memory"),
    ({"rtol": "abc"}, "input 'rtol' must be a number ≥ 0 like 1e-4 (0 turns that part of the tolerance off), got 'abc'"),
    ({"atol": "-1"}, "input 'atol' must be a number ≥ 0 like 1e-4 (0 turns that part of the tolerance off), got '-1'"),
    ({"check_timeout_seconds": "0"}, "input 'check-timeout-seconds' must be a positive number"),
    ({"baseline_torch_version": "current", "max_latency_regression": "ten"},
     "input 'max-latency-regression' must be a percentage like 10% or a ratio like 0.10, got 'ten'"),
    ({"max_memory_regression": "20%"}, "input 'max-memory-regression' compares with a baseline"),
    ({"max_compile_time_regression": "40%"}, "input 'max-compile-time-regression' compares with a baseline"),
    ({"compile_time": "yes please"}, "input 'compile-time' must be true or false, got 'yes please'"),
    ({"ddp": "2"}, "input 'ddp' must be true or false, got '2'"),
    ({"baseline_torch_version": "current", "undecided": "maybe"}, "input 'undecided' must be fail or pass, got 'maybe'"),
    ({"baseline_torch_version": "current", "ab_budget": "0"}, "input 'ab-budget' must be a positive number"),
    ({"undecided": "pass"}, "input 'undecided' compares with a baseline"),
    ({"baseline_torch_version": "current", "fail_on_shared_failures": "sometimes"},
     "input 'fail-on-shared-failures' must be true or false (or empty for the config's), got 'sometimes'"),
    ({"fail_on_shared_failures": "true"}, "input 'fail-on-shared-failures' judges failures the baseline shares"),
    ({"threads": "0"}, "input 'threads' must be 1 or more (a whole number like 4), got '0'"),
    ({"max_latency_ms": "mlp"}, "input 'max-latency-ms' must be NAME=MS with MS a positive number of milliseconds"),
    ({"fail_on": "speed"}, "input 'fail-on' must be a comma-separated list of correctness, latency, memory, warnings, or none"),
    ({"fail_on": "none,latency"}, "input 'fail-on' must be a comma-separated list"),
    ({"job_summary": "maybe"}, "input 'job-summary' must be true or false, got 'maybe'"),
    ({"index_url": "https://x.example/simple"}, "input 'index-url' is used only to install torch"),
    ({"torch_backend": "cpu"}, "input 'torch-backend' is used only to install torch"),
    ({"working_directory": "/nonexistent/dir"}, "input 'working-directory' must be an existing folder"),
    ({"bisect": "sometimes"}, "input 'bisect' must be true or false, got 'sometimes'"),
    ({"baseline_torch_version": "2.13.0", "bisect": "true"}, "input 'bisect' searches the builds up to the candidate"),
    ({"candidate_torch_version": "nightly", "bisect": "true"}, "input 'bisect' needs a build known good: set 'bisect-good'"),
    ({"candidate_torch_version": "nightly", "baseline_torch_version": ">=2.12,<2.14", "bisect": "true"},
     "input 'baseline-torch-version' must be one torch version to bisect from"),
    ({"candidate_torch_version": "nightly", "bisect": "true", "bisect_good": "yesterday"},
     "input 'bisect-good' must be one torch version to bisect from"),
    ({"candidate_torch_version": "nightly", "bisect_good": "2.14.0.dev20261110"},
     "input 'bisect-good' is used only with 'bisect: true'"),
])
def test_bad_input_is_one_sentence_naming_input_and_value(inputs: dict[str, str], message: str) -> None:
    problems = plan(_env(**inputs)).problems
    assert len(problems) == 1 and message in problems[0], problems
    assert "\n" not in problems[0]


def test_every_problem_is_reported_together_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_env(rtol="x", atol="y", device="tpu")) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 3 and all(line.startswith("torch-upgrade-check: error: input '") for line in err)


def test_bad_inputs_are_annotations_and_the_outputs_say_error(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "github_output"
    output.write_text("")
    env = {**_env(rtol="abc", fail_on="speed"), "GITHUB_ACTIONS": "true", "GITHUB_OUTPUT": str(output)}
    assert main(env) == 2
    problems = plan(env).problems
    assert capsys.readouterr().out.splitlines() == [
        f"::error title=torch-upgrade-check%3A input 'rtol'::{problems[0]}",
        f"::error title=torch-upgrade-check%3A input 'fail-on'::{problems[1]}"]
    blocks = re.findall(r"^([a-z-]+)<<(ghadelimiter_\S+)\n(.*?)\n\2$", output.read_text(), re.MULTILINE | re.DOTALL)
    written = {name: value for name, _, value in blocks}
    assert written == {"verdict": "error", "passed": "0", "suspicious": "0", "shared-failures": "0", "failed": "0",
                       "errors": "0",
                       "skipped": "0", "not-run": "0", "total": "0", "not-judged": "0", "report": "", "junit": "", "summary": ""}


def test_annotations_stop_at_githubs_ten_and_say_how_many_more() -> None:
    stream = io.StringIO()
    problems = [f"input 'x{i}' is wrong" for i in range(12)] + ["a config line: 100% wrong, really"]
    github.stopped_early(problems, environ={"GITHUB_ACTIONS": "true"}, stream=stream, title="tuc: bad config")
    lines = stream.getvalue().splitlines()
    assert lines[:2] == ["::error title=torch-upgrade-check%3A input 'x0'::input 'x0' is wrong",
                         "::error title=torch-upgrade-check%3A input 'x1'::input 'x1' is wrong"]
    assert len(lines) == 11 and lines[-1] == "::notice title=torch-upgrade-check::and 3 more problems: see the step's log"
    stream = io.StringIO()
    github.stopped_early(problems[-1:], environ={"GITHUB_ACTIONS": "true"}, stream=stream, title="tuc: bad config")
    assert stream.getvalue() == "::error title=tuc%3A bad config::a config line: 100%25 wrong, really\n"
    stream = io.StringIO()
    assert github.stopped_early(problems, environ={}, stream=stream)["verdict"] == "error"
    assert stream.getvalue() == ""  # off GitHub: the plain stderr lines are enough


def test_blank_inputs_take_the_defaults() -> None:
    values = action_inputs.read_inputs(_env(fail_on="  ", device="", python=""))
    assert values["fail-on"] == "correctness,latency,memory" and values["device"] == "auto"
    assert values["python"] == "python3"


def test_exit_codes_of_the_cli_pass_through(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    for rc, expected, said in ((0, 0, ""), (1, 1, "thresholds crossed"), (2, 2, "usage or configuration"),
                               (3, 3, "infrastructure"), (-11, 3, "exit code -11")):
        monkeypatch.setattr(subprocess, "run", lambda *a, rc=rc, **k: subprocess.CompletedProcess(a, rc))
        assert main(_env()) == expected
        err = capsys.readouterr().err
        assert (said in err) if said else err == ""


def test_entry_module_imports_without_torch() -> None:
    code = "import sys; sys.modules['torch'] = None\nimport torch_upgrade_check.action_entry\nprint('ok')"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def test_bisect_follows_a_failed_compare_with_its_flags_on_the_failed_checks() -> None:
    values = action_inputs.read_inputs(_env(candidate_torch_version="nightly", baseline_torch_version="2.13.0", bisect="true",
                                           bisect_good="2.14.0.dev20261110", index_url="file:///srv/simple",
                                           rtol="0", check_timeout_seconds="600", device="cpu", fail_on="correctness",
                                           report_dir="reports/torch", job_summary="false"))
    assert action_inputs.validate(values) == []
    argv = action_argv.bisect_argv(values, "2.14.0.dev20261120", ["cnn[float32]/numerics", "mlp[float32]/compile"])
    assert argv == ["bisect", "--good", "2.14.0.dev20261110", "--bad", "2.14.0.dev20261120", "--python", "python3",
                    "--index-url", "file:///srv/simple", "--device", "cpu", "--out", "reports/torch/bisect",
                    "--only", "cnn[float32]/numerics", "--only", "mlp[float32]/compile", "--rtol", "0",
                    "--timeout", "600", "--fail-on", "correctness", "--no-job-summary"]
    # without bisect-good, the baseline is where the search starts
    values = action_inputs.read_inputs(_env(candidate_torch_version="2.14.1", baseline_torch_version="2.13.0", bisect="true"))
    assert action_argv.bisect_argv(values, "2.14.1", ["x"])[:5] == ["bisect", "--good", "2.13.0", "--bad", "2.14.1"]


def test_a_bisection_that_cannot_start_warns_and_says_error_in_its_outputs(tmp_path: Path) -> None:
    output = tmp_path / "gh-output"
    environ = {"GITHUB_ACTIONS": "true", "GITHUB_OUTPUT": str(output)}
    stream = io.StringIO()
    values = action_inputs.read_inputs(_env(candidate_torch_version="2.14.1", baseline_torch_version="2.13.0", bisect="true"))
    with contextlib.redirect_stdout(stream):
        outputs = action_bisect.bisect_after_failure(values, tmp_path, environ)  # no report.json there
    assert outputs["bisect-outcome"] == "error" and set(outputs) == set(action_bisect.BISECT_OUTPUTS)
    assert outputs["bisect-first-bad"] == "" and "bisect-outcome<<" in output.read_text()
    assert "::warning title=torch-upgrade-check%3A bisect::error: no compare report to bisect from" in stream.getvalue()


@pytest.mark.parametrize(("old", "new", "value", "argv_part"), [
    ("torch_version", "candidate_torch_version", "2.13.0", ("compare", "--candidate", "2.13.0")),
    ("suite", "checks", "mlp", ("--only", "mlp")),
    ("timeout", "check_timeout_seconds", "900", ("--timeout", "900")),
])
def test_a_deprecated_input_name_works_as_the_new_one_and_warns_once(
        old: str, new: str, value: str, argv_part: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    as_old, as_new = plan(_env(**{old: value})), plan(_env(**{new: value}))
    assert as_old.problems == () and as_old.argv == as_new.argv
    assert " ".join(argv_part) in " ".join(as_old.argv)
    warnings, problems = alias_notes(_env(**{old: value}))
    assert problems == [] and len(warnings) == 1 and f"rename it to '{new.replace('_', '-')}'" in warnings[0]
    assert alias_notes(_env(**{new: value})) == ([], [])  # the new name: no warning
    # both names, different values: one problem naming both
    (problem,) = plan(_env(**{old: value, new: "1" + value})).problems
    assert f"'{old.replace('_', '-')}'" in problem and f"'{new.replace('_', '-')}'" in problem


def test_the_report_upload_is_on_by_default_and_takes_a_name(tmp_path: Path) -> None:
    base = {"working_directory": str(tmp_path)}
    on = upload_plan(_env(**base))
    assert on == {"enabled": "true", "name": "torch-upgrade-check-report",
                  "path": str((tmp_path / "torch-upgrade-check-report").resolve())}
    assert upload_plan(_env(**base, upload_report="false"))["enabled"] == "false"
    named = upload_plan(_env(**base, upload_report="torch-report-linux", report_dir="reports/torch"))
    assert named == {"enabled": "true", "name": "torch-report-linux", "path": str((tmp_path / "reports/torch").resolve())}
    (problem,) = plan(_env(**base, upload_report="a/b")).problems
    assert problem.startswith("input 'upload-report' must be true, false or an artifact name")


def test_in_a_matrix_each_job_uploads_its_report_under_a_name_of_its_own(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # strategy.job-index / job-total, as action.yml's upload step passes them; one name for every job would
    # make each upload (overwrite: true) replace the last one's
    base = _env(working_directory=str(tmp_path))
    names = [upload_plan({**base, "STRATEGY_JOB_INDEX": str(i), "STRATEGY_JOB_TOTAL": "3"})["name"] for i in range(3)]
    assert names == ["torch-upgrade-check-report-0", "torch-upgrade-check-report-1", "torch-upgrade-check-report-2"]
    assert "as artifact 'torch-upgrade-check-report-2' (job 3 of 3 in a matrix)" in capsys.readouterr().out
    # no matrix (job-total 1), or no strategy context at all: the plain name
    assert upload_plan({**base, "STRATEGY_JOB_INDEX": "0", "STRATEGY_JOB_TOTAL": "1"})["name"] == "torch-upgrade-check-report"
    assert upload_plan(base)["name"] == "torch-upgrade-check-report"
    # a name the user set is kept as set, also in a matrix
    named = upload_plan({**_env(working_directory=str(tmp_path), upload_report="torch-report-linux"),
                         "STRATEGY_JOB_INDEX": "1", "STRATEGY_JOB_TOTAL": "3"})
    assert named["name"] == "torch-report-linux"
    assert "as artifact 'torch-report-linux'" in capsys.readouterr().out


def test_the_upload_step_gets_the_strategy_context_through_env() -> None:
    action = yaml.safe_load((Path(__file__).resolve().parents[2] / "action.yml").read_text())
    (decide,) = [s for s in action["runs"]["steps"] if s.get("id") == "upload"]
    assert decide["env"]["STRATEGY_JOB_INDEX"] == "${{ strategy.job-index }}"
    assert decide["env"]["STRATEGY_JOB_TOTAL"] == "${{ strategy.job-total }}"
    (upload,) = [s for s in action["runs"]["steps"] if s.get("uses", "").startswith("actions/upload-artifact")]
    assert upload["with"]["name"] == "${{ steps.upload.outputs.name }}"


def test_under_act_the_report_is_uploaded_only_when_act_has_an_artifact_server(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # without a server (no ACTIONS_RUNTIME_URL) actions/upload-artifact fails, and would fail a passing check
    act = {**_env(working_directory=str(tmp_path)), "ACT": "true"}
    assert upload_plan(act)["enabled"] == "false"
    assert "act has no artifact server here (act --artifact-server-path DIR" in capsys.readouterr().out
    served = upload_plan({**act, "ACTIONS_RUNTIME_URL": "http://127.0.0.1:34567/"})
    assert served["enabled"] == "true" and served["name"] == "torch-upgrade-check-report"


def test_a_deprecated_name_warns_once_in_the_check_step_and_not_in_the_others(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "github_output"
    output.write_text("")
    # a bad rtol stops the check step before the CLI runs, after the warning
    env = {**_env(suite="mlp", rtol="abc", working_directory=str(tmp_path)), "GITHUB_ACTIONS": "true",
           "GITHUB_OUTPUT": str(output)}
    assert main(env, ["cache-key"]) == 0 and main(env, ["upload"]) == 0
    assert "deprecated" not in capsys.readouterr().err
    assert main(env) == 2
    captured = capsys.readouterr()
    assert captured.err.count("input 'suite' is deprecated") == 1
    warnings = [line for line in captured.out.splitlines() if line.startswith("::warning")]
    assert len(warnings) == 1 and "rename it to 'checks'" in warnings[0]
    assert re.search(r"^enabled<<(\S+)\ntrue\n\1$", output.read_text(), re.MULTILINE)  # the upload step's outputs
