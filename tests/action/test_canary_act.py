"""The canary workflow (workflows/torch-canary.yml, as a team copies it) under act, with a local bare repository as
the history's remote (the repository variable TORCH_CANARY_REMOTE names it, as a team may name another repository).

- Its publish job, alone: two runs at once both land their records (their pushes held at a barrier, so one is
  rejected and retried), and a push that loses to another job's commit made just before it is retried.
- The whole canary end to end: three nights of "nightlies" from a local index (tests/harness/nightlies.py: this
  machine's torch relabelled, a numeric drift injected from one build on) against a pinned build; the third night
  fails, the history alarms, the canary bisects between the last good and the first bad night, and the answer lands
  in the summary and in the record pushed to the history branch.
- The canary job's history steps alone (as the workflow has them, after the action's install without extras): a
  stored latency series that stepped, tonight's run passing, alarms with its trend line and chart (the step installs
  the `history` extra into the action's venv); with no index it warns and goes on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml
from act_harness import ActRun, act_or_skip, copy_repository, pip_sources, run_act_event
from history_cases import IDENTITY, comparison, correctness, history_records, latency, load, nightly

from torch_upgrade_check.history import record as rec
from torch_upgrade_check.history import store
from torch_upgrade_check.model import Outcome

pytestmark = [pytest.mark.act, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
CANARY = ROOT / "workflows" / "torch-canary.yml"
BRANCH = "torch-upgrade-check-history"


@pytest.fixture(scope="module")
def act() -> str:
    return act_or_skip()


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_repository(tmp_path_factory.mktemp("action-repo"))


def git(*args: str, cwd: Path | None = None) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com"}
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True, env=env).stdout.strip()


def caller_repo(path: Path, files: dict[str, str]) -> Path:
    """The team's repository: the canary workflow as copied, and `files`, in one commit."""
    (path / ".github" / "workflows").mkdir(parents=True)
    (path / ".github" / "workflows" / "torch-canary.yml").write_text(CANARY.read_text())
    for name, text in files.items():
        (path / name).write_text(text)
    git("init", "-q", cwd=path)
    git("add", "-A", cwd=path)
    git("commit", "-qm", "the team's repository", cwd=path)
    return path


def bare_remote(path: Path) -> Path:
    git("init", "-q", "--bare", str(path))
    return path


def records_on(remote: Path, tmp: Path) -> list[dict]:
    clone = tmp / f"clone-{len(list(tmp.glob('clone-*')))}"
    git("clone", "-q", "--branch", BRANCH, str(remote), str(clone))
    return store.read(clone)


def runner_record(n: int) -> str:
    """One runner's record.jsonl as the canary job uploads it: built by history.record from a real report."""
    report = load(comparison("2.13.0", f"2.14.0.dev202612{n:02d}+cpu", latency("mlp", 1.0 + n / 100),
                             correctness("mlp")))
    return json.dumps(rec.from_report(report, identity=IDENTITY, commit=f"{n:040x}",
                                      when=f"2026-12-{n:02d}T04:17:00Z")) + "\n"


def publish_only(act: str, repo: Path, tmp: Path, remote: Path, numbers: list[int], *,
                 hooks: Path | None = None) -> ActRun:
    """The canary workflow whose runner job leaves no report (the caller has no requirements.txt: its compare stops
    at once, exit 2), with runners' records (one per number) already waiting as artifacts for its publish job.
    (act runs a job's `needs` too, so the publish job cannot run alone.)"""
    caller = caller_repo(tmp / "caller", {})
    artifacts = tmp / "artifacts"
    for i, n in enumerate(numbers):
        # named apart from the canary job's own upload (torch-canary-record-<job index>)
        (artifacts / f"torch-canary-record-runner-{i}").mkdir(parents=True)
        (artifacts / f"torch-canary-record-runner-{i}" / "record.jsonl").write_text(runner_record(n))
    env = {"PIP_DISABLE_PIP_VERSION_CHECK": "1", **pip_sources()}
    if hooks:  # git's own hooks for the publisher's pushes, through git's environment configuration
        env.update({"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "core.hooksPath", "GIT_CONFIG_VALUE_0": str(hooks)})
    return run_act_event(act, caller, "workflow_dispatch", {"inputs": {}}, CANARY, tmp=tmp, repo=repo, env=env,
                         variables={"TORCH_CANARY_REMOTE": str(remote)})


def pre_push_hook(folder: Path, script: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    hook = folder / "pre-push"
    hook.write_text("#!/bin/sh\n" + script)
    hook.chmod(0o755)
    return folder


def test_two_concurrent_canaries_both_land_their_records(act: str, repo: Path, tmp_path: Path) -> None:
    """Two canary runs publish at once; a pre-push hook holds each first push until both have committed on the same
    tip, so both pushes race: one is rejected, fetched again, re-applied and pushed; no record is lost."""
    remote = bare_remote(tmp_path / "history.git")
    gate = tmp_path / "gate"
    gate.mkdir()
    hooks = pre_push_hook(tmp_path / "hooks", f"""\
touch "{gate}/ready-$PPID"
i=0
while [ "$(ls "{gate}" | wc -l)" -lt 2 ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
exit 0
""")
    runs: dict[int, ActRun] = {}

    def canary(n: int) -> None:
        runs[n] = publish_only(act, repo, tmp_path / f"run-{n}", remote, [n], hooks=hooks)

    threads = [threading.Thread(target=canary, args=(n,)) for n in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(900)
    for run in runs.values():
        assert run.job("publish") == "success", run.explain()
    text = "".join(run.text() for run in runs.values())
    assert "moved while publishing (another job pushed first)" in text, text[-4000:]
    assert "attempt 2 of 5" in text
    assert sorted(r["commit"] for r in records_on(remote, tmp_path)) == [f"{n:040x}" for n in (1, 2)]
    log = git("--git-dir", str(remote), "rev-list", "--parents", BRANCH).splitlines()
    assert len(log) == 2 and len(log[0].split()) == 2  # a line of history: the second commit on the first


def test_a_push_beaten_by_another_jobs_commit_is_retried(act: str, repo: Path, tmp_path: Path) -> None:
    """Deterministic: on the publisher's first push, its pre-push hook lands another job's record on the branch
    first, so the remote rejects the push; the publisher fetches, appends again on the new tip, and pushes. Both
    records land; the other job's commit stays as it was pushed."""
    remote = bare_remote(tmp_path / "history.git")
    seed = tmp_path / "seed"
    git("init", "-q", str(seed))
    git("checkout", "-q", "--orphan", BRANCH, cwd=seed)
    (seed / "records.jsonl").write_text(runner_record(1))
    git("add", "-A", cwd=seed)
    git("commit", "-qm", "the history so far", cwd=seed)
    git("push", "-q", str(remote), BRANCH, cwd=seed)
    # the other job: commits record 2 on the branch and pushes it, once, before our publisher's push goes out
    other = f"""\
[ -e "{tmp_path}/other-done" ] && exit 0
touch "{tmp_path}/other-done"
unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE  # git runs the hook inside the publisher's own repository
cd "{seed}" || exit 1
printf '%s' '{runner_record(2).strip()}' >> records.jsonl && echo >> records.jsonl
GIT_CONFIG_COUNT=0 git -c core.hooksPath=/dev/null commit -qam "another job's record" \\
  && GIT_CONFIG_COUNT=0 git -c core.hooksPath=/dev/null push -q "{remote}" {BRANCH}
"""
    hooks = pre_push_hook(tmp_path / "hooks", other)
    run = publish_only(act, repo, tmp_path / "run", remote, [3], hooks=hooks)
    assert run.job("publish") == "success", run.explain()
    assert any("left no report" in message for _, _, message in run.annotations("canary on")), run.annotations()
    assert "attempt 2 of 5" in run.text(), run.explain()
    others = git("rev-parse", BRANCH, cwd=seed)
    assert git("--git-dir", str(remote), "merge-base", "--is-ancestor", others, BRANCH) == ""
    assert [r["commit"] for r in records_on(remote, tmp_path)] == [f"{n:040x}" for n in (1, 2, 3)]


def test_the_canary_end_to_end_alarms_bisects_and_keeps_the_answer(act: str, repo: Path, tmp_path: Path,
                                                                   torch_python: str) -> None:
    """Nightlies from a local index stand in for PyTorch's channel: this machine's torch relabelled, outputs drifting
    from the fifth build on. Night 1 checks a good build (passes: one record, no alarm); night 2 a bad one (fails:
    the history alarms on the first failure, the canary bisects between night 1's build and night 2's on the same
    runner, names the first bad build, and its answer lands in the summary and in night 2's record)."""
    from harness.nightlies import nightly_index

    versions = [f"2.14.0.dev202611{10 + i:02d}" for i in range(6)]
    url = nightly_index(torch_python, tmp_path / "index", versions, fault_from=4, drift=1e-3)
    remote = bare_remote(tmp_path / "history.git")
    runners = json.dumps([{"labels": ["ubuntu-latest"], "python": torch_python, "device": "cpu"}])
    env = {"PIP_DISABLE_PIP_VERSION_CHECK": "1", **pip_sources(), "XDG_CACHE_HOME": str(tmp_path / "xdg")}

    def night(n: int, candidate: str) -> ActRun:
        caller = caller_repo(tmp_path / f"caller-{n}", {"requirements.txt": f"torch=={versions[0]}\n"})
        inputs = {"candidate": candidate, "runners": runners, "checks": "mlp[float32]/numerics", "index-url": url}
        return run_act_event(act, caller, "workflow_dispatch", {"inputs": inputs}, CANARY, tmp=tmp_path / f"night-{n}",
                             repo=repo, env=env, variables={"TORCH_CANARY_REMOTE": str(remote)}, timeout_s=1500)

    first = night(1, versions[2])
    assert first.job("canary on") == "success" and first.job("publish") == "success", first.explain()
    assert first.step_outputs("canary on", "Read the history and add this run to it").get("alarm") == "false", \
        first.explain()
    (one,) = records_on(remote, tmp_path)
    assert one["torch"]["candidate"]["version"].startswith(versions[2]) and "bisect" not in one

    second = night(2, versions[5])
    assert second.job("canary on") == "failure", second.explain()  # the candidate failed: the job says so, last
    assert second.job("publish") == "success", second.explain()  # and its record is kept all the same
    history = second.step_outputs("canary on", "Read the history and add this run to it")
    assert history.get("alarm") == "true", second.explain()
    assert versions[2] in history.get("last-good", "") and versions[5] in history.get("first-bad", ""), history
    summary = "\n".join(second.summaries("canary on"))
    assert "## torch canary: the history" in summary and "Bisection: **found**" in summary, summary[-3000:]
    assert f"`{versions[4]}`" in summary and f"`{versions[3]}`" in summary, summary[-3000:]
    assert "Trend charts (PNG): [download](file://" in summary, summary[-3000:]
    _, two = records_on(remote, tmp_path)
    assert two["torch"]["candidate"]["version"].startswith(versions[5])
    assert two["checks"]["mlp[float32]/numerics"]["outcome"] == "failed"
    assert (two["bisect"]["outcome"], two["bisect"]["first_bad"], two["bisect"]["last_good"]) == (
        "found", versions[4], versions[3]), two["bisect"]


def history_step_only(report: Path, source: Path, history_env: dict[str, str] | None = None, *,
                      compare_exit: int = 0) -> str:
    """The canary job's history, charts, summary, record and last steps exactly as workflows/torch-canary.yml has
    them, after a stand-in for the compare step that installs the tool as the action does (a venv at the action's
    path, the tool without extras), names a report made by the test and exits `compare_exit` (continuing on error,
    as the compare step does). JSON is YAML: the workflow is written as JSON."""
    doc = yaml.safe_load(CANARY.read_text())
    job = doc["jobs"]["canary"]
    kept = {"history", "charts"}
    named = {"Write the trend into the job summary", "Upload this run's record", "Fail when the candidate failed"}
    steps = [s for s in job["steps"] if s.get("id") in kept or s.get("name") in named]
    for step in steps:
        if step.get("id") == "history" and history_env:  # the history step's own environment, added to
            step["env"] = {**step["env"], **history_env}
    install = {"name": "Install the tool as the action does, and name the report", "id": "tuc", "shell": "bash",
               "env": {"SOURCE": str(source), "REPORT_JSON": str(report), "PY": sys.executable},
               "run": 'set -eu\nvenv="$RUNNER_TEMP/torch-upgrade-check/venv"\nrm -rf -- "$venv"\n"$PY" -m venv "$venv"\n'
                      '"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$SOURCE"\n'
                      f'echo "report=$REPORT_JSON" >> "$GITHUB_OUTPUT"\nexit {compare_exit}\n',
               "continue-on-error": True}
    workflow = {"name": "torch canary, its history steps", "on": {"workflow_dispatch": {}}, "permissions": {},
                "jobs": {"canary": {"name": "canary on ubuntu-latest", "runs-on": job["runs-on"],
                                    "strategy": job["strategy"],  # the canary's matrix: its names use it
                                    "permissions": {"contents": "read"}, "steps": [install, *steps]}}}
    return json.dumps(workflow, indent=2)


STEPPED = [1.0, 1.01, 0.99, 1.0, 1.02, 0.98, 1.0, 1.01, 0.99, 1.0, 1.0, 1.18, 1.19]  # latency, stepped at night 12


def stepped_history_run(act: str, repo: Path, tmp_path: Path, history_env: dict[str, str] | None = None) -> ActRun:
    """history_step_only under act, its remote's store holding this runner's stepped latency series, and tonight's
    report a latency of 1.17x that passed (no failure anywhere)."""
    remote = bare_remote(tmp_path / "history.git")
    seed = tmp_path / "seed"
    git("init", "-q", str(seed))
    git("checkout", "-q", "--orphan", BRANCH, cwd=seed)
    for r in history_records(STEPPED, identity=rec.runner_identity()):  # act runs the job on this machine
        store.append(seed, r)
    git("add", "-A", cwd=seed)
    git("commit", "-qm", "the history so far", cwd=seed)
    git("push", "-q", str(remote), BRANCH, cwd=seed)
    report = tmp_path / "report.json"
    report.write_text(comparison("2.14.0", nightly(14), latency("mlp", 1.17), correctness("mlp")))
    workflow = tmp_path / "history-steps.yml"
    workflow.write_text(history_step_only(report, repo, history_env))
    caller = caller_repo(tmp_path / "caller", {})
    env = {"PIP_DISABLE_PIP_VERSION_CHECK": "1", **pip_sources()}
    return run_act_event(act, caller, "workflow_dispatch", {"inputs": {}}, workflow, tmp=tmp_path / "run", repo=repo,
                         env=env, variables={"TORCH_CANARY_REMOTE": str(remote)})


def test_a_latency_step_alarms_with_its_trend_line_and_chart(act: str, repo: Path, tmp_path: Path) -> None:
    """The canary's history step on a runner whose action installed the tool without the `history` extra: a store
    holding this runner's latency series, stepped 18% two nights ago, and tonight's report (latency 1.17x, passed: no
    failure anywhere). The step adds the extra to the action's venv, so ruptures finds the step: it alarms, names the
    last good and first bad nightly, and the summary has the trend line and the chart's link."""
    run = stepped_history_run(act, repo, tmp_path)
    assert run.job("canary on") == "success", run.explain()
    history = run.step_outputs("canary on", "Read the history and add this run to it")
    assert history == {"artifact-suffix": "ubuntu-latest",  # its artifacts' names: the runner's labels (act: no index)
                       "alarm": "true", "last-good": nightly(11), "first-bad": nightly(12),  # as recorded
                       "last-good-public": nightly(11).split("+")[0],  # what bisect installs: the public versions
                       "first-bad-public": nightly(12).split("+")[0]}, run.explain()
    assert not any("history extra" in message for _, _, message in run.annotations("canary on")), run.annotations()
    summary = "\n".join(run.summaries("canary on"))
    line = "latency 1\\.18x since nightly 2026\\-11\\-12 \\(last good nightly 2026\\-11\\-11\\)"  # Markdown-escaped
    assert line in summary, summary
    assert "(mlp-float32-latency.png)" in summary, summary
    assert "Trend charts (PNG): [download](file://" in summary, summary
    assert "change points not computed" not in summary, summary
    (png,) = (tmp_path / "run" / "artifacts").rglob("mlp-float32-latency.png")  # the chart, uploaded
    # named by the runner's labels: act leaves strategy.job-index empty, which named it `torch-canary-charts-`
    assert png.parent.name == "torch-canary-charts-ubuntu-latest", png
    assert png.read_bytes().startswith(b"\x89PNG")


def test_without_an_index_the_history_step_warns_and_still_reports(act: str, repo: Path, tmp_path: Path) -> None:
    """The same history when the history extra cannot be installed (no index, no wheels for the step): the step
    warns, goes on, records the run and reports as the tool can without ruptures: no step found, and it says so."""
    empty = tmp_path / "no-wheels"
    empty.mkdir()
    no_index = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(empty), "UV_NO_INDEX": "1", "UV_FIND_LINKS": str(empty),
                "UV_OFFLINE": "1"}
    run = stepped_history_run(act, repo, tmp_path, no_index)
    assert run.job("canary on") == "success", run.explain()
    warnings = [message for _, _, message in run.annotations("canary on")]
    assert any("no history extra (ruptures" in message and "first failures still alarm" in message
               for message in warnings), run.text()[-3000:]
    assert run.step_outputs("canary on", "Read the history and add this run to it").get("alarm") == "false"
    summary = "\n".join(run.summaries("canary on"))
    assert "change points not computed" in summary, summary


def test_a_night_with_no_new_build_is_a_notice_not_a_failure(act: str, repo: Path, tmp_path: Path) -> None:
    """The nightly channel's newest build is the very torch the branch pins: compare stops with exit 2 ("nothing
    would be compared"), its report's two sides the same torch. The canary says "no new build" in a notice and the
    summary, records nothing (no record artifact: the series go on unbroken) and the job passes; before, the job
    failed every such night as if the team's input were wrong."""
    report = tmp_path / "report.json"
    report.write_text(comparison("2.14.0+cpu", "2.14.0+cpu"))  # compare's report when it stops: both sides' torch
    workflow = tmp_path / "history-steps.yml"
    workflow.write_text(history_step_only(report, repo, compare_exit=2))
    caller = caller_repo(tmp_path / "caller", {})
    env = {"PIP_DISABLE_PIP_VERSION_CHECK": "1", **pip_sources()}
    run = run_act_event(act, caller, "workflow_dispatch", {"inputs": {}}, workflow, tmp=tmp_path / "run", repo=repo,
                        env=env, variables={"TORCH_CANARY_REMOTE": str(tmp_path / "never-read.git")})
    assert run.job("canary on") == "success", run.explain()
    history = run.step_outputs("canary on", "Read the history and add this run to it")
    assert history.get("no-new-build") == "true" and history.get("alarm") == "false", history
    notices = [message for level, _, message in run.annotations("canary on") if level == "notice"]
    assert any("no new build: the newest nightly is torch 2.14.0+cpu" in m for m in notices), run.annotations()
    assert "No new build tonight" in "\n".join(run.summaries("canary on"))
    assert not list((tmp_path / "run" / "artifacts").glob("torch-canary-record-*")), "a night with no build recorded"


def test_a_failed_compare_of_two_builds_still_fails_the_job(act: str, repo: Path, tmp_path: Path) -> None:
    """The counter-case: a compare that failed with two different torches is a real failure; the job fails."""
    report = tmp_path / "report.json"
    report.write_text(comparison("2.14.0+cpu", nightly(14), correctness("mlp", Outcome.FAILED)))
    workflow = tmp_path / "history-steps.yml"
    workflow.write_text(history_step_only(report, repo, compare_exit=1))
    caller = caller_repo(tmp_path / "caller", {})
    env = {"PIP_DISABLE_PIP_VERSION_CHECK": "1", **pip_sources()}
    remote = bare_remote(tmp_path / "history.git")
    run = run_act_event(act, caller, "workflow_dispatch", {"inputs": {}}, workflow, tmp=tmp_path / "run", repo=repo,
                        env=env, variables={"TORCH_CANARY_REMOTE": str(remote)})
    assert run.job("canary on") == "failure", run.explain()
    assert "no-new-build" not in run.step_outputs("canary on", "Read the history and add this run to it")
    assert list((tmp_path / "run" / "artifacts").glob("torch-canary-record-*")), "the failure is recorded"
