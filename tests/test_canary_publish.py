"""`history publish` against a real local bare repository as the remote: the orphan branch, lost races retried, no record lost."""

from __future__ import annotations

import json
import subprocess
import threading
from argparse import Namespace
from pathlib import Path

import jsonschema
import pytest
from history_cases import comparison, correctness, latency

from torch_upgrade_check.errors import EXIT_INFRA, EXIT_PASSED, UsageError
from torch_upgrade_check.history import publish as pub
from torch_upgrade_check.history import record as rec
from torch_upgrade_check.history import store
from torch_upgrade_check.model import Bisection
from torch_upgrade_check.schema import write_bisection

BRANCH = "torch-upgrade-check-history"


def git(*args: str, cwd: Path | None = None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


def bare_remote(tmp: Path) -> Path:
    remote = tmp / "remote.git"
    git("init", "--quiet", "--bare", str(remote))
    return remote


def record(n: int, *, candidate: str = "2.14.0.dev20261203") -> dict:
    """A record by hand, in the schema's shape (what history.record.from_report makes)."""
    return {"schema": pub.RECORD_SCHEMA, "when": f"2026-12-{n % 28 + 1:02d}T04:17:00Z", "commit": f"{n:040x}",
            "identity": {"cpu": "test CPU", "gpu": None, "driver": None, "os": "Linux", "machine": "x86_64"},
            "torch": {"baseline": {"version": "2.13.0"}, "candidate": {"version": candidate}},
            "checks": {"mlp[cpu-float32]/latency": {"outcome": "passed", "ratio": 1.0 + n / 1000, "ci": [0.99, 1.01],
                                                   "metrics": {}}}}


def branch_records(remote: Path, tmp: Path) -> list[dict]:
    """What the branch holds now, read the way `history` reads it (a fresh clone, store.read)."""
    clone = tmp / f"clone-{len(list(tmp.iterdir()))}"
    git("clone", "--quiet", "--branch", BRANCH, str(remote), str(clone))
    return store.read(clone)


def history_of(remote: Path) -> list[str]:
    return git("--git-dir", str(remote), "rev-list", "--first-parent", BRANCH).splitlines()


def test_first_publish_creates_the_orphan_branch_and_leaves_the_store(tmp_path: Path) -> None:
    remote = bare_remote(tmp_path)
    out = tmp_path / "store"
    done = pub.publish(str(remote), BRANCH, [record(1)], store_out=out)
    assert done.attempts == 1
    assert history_of(remote) == [done.commit]  # one commit, no parent: an orphan branch
    assert git("--git-dir", str(remote), "rev-list", "--parents", "-n1", BRANCH).split() == [done.commit]
    assert branch_records(remote, tmp_path) == [record(1)]
    assert store.read(out) == [record(1)]  # the store as pushed, for `history --markdown` right after


def test_a_push_that_loses_the_race_is_retried_on_the_new_tip(tmp_path: Path) -> None:
    """Publisher A commits on the tip it fetched; before its push, B publishes: A's push is rejected (non-fast-forward),
    A fetches B's commit, appends again and lands. B's commit stays in the history as B pushed it."""
    remote = bare_remote(tmp_path)
    pub.publish(str(remote), BRANCH, [record(1)])
    landed: list[pub.Published] = []

    def other_job_pushes_first(attempt: int) -> None:
        if attempt == 1:
            landed.append(pub.publish(str(remote), BRANCH, [record(2)]))

    pauses: list[float] = []
    a = pub.publish(str(remote), BRANCH, [record(3)], before_push=other_job_pushes_first, sleep=pauses.append)
    assert a.attempts == 2 and len(pauses) == 1 and 0 <= pauses[0] <= pub.JITTER_CAP_S
    b = landed[0]
    assert git("--git-dir", str(remote), "merge-base", "--is-ancestor", b.commit, a.commit) == ""  # not rewritten
    assert history_of(remote)[:2] == [a.commit, b.commit]
    assert branch_records(remote, tmp_path) == [record(1), record(2), record(3)]


def test_two_concurrent_publishers_both_land_their_records(tmp_path: Path) -> None:
    """Two real publishers on threads, held at a barrier after their commits so both push onto the same tip at once:
    one push is rejected, and both records land (the orphan branch's creation raced too)."""
    remote = bare_remote(tmp_path)
    barrier = threading.Barrier(2, timeout=60)
    results: dict[int, pub.Published] = {}
    errors: list[BaseException] = []

    def job(n: int) -> None:
        try:
            results[n] = pub.publish(str(remote), BRANCH, [record(n)], attempts=5,
                                     before_push=lambda attempt: barrier.wait() if attempt == 1 else None,
                                     sleep=lambda s: None)
        except BaseException as e:  # reported below, beside the other thread's result
            errors.append(e)

    threads = [threading.Thread(target=job, args=(n,)) for n in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert sorted(r.attempts for r in results.values()) == [1, 2]  # exactly one lost the race and retried
    got = branch_records(remote, tmp_path)
    assert sorted(r["commit"] for r in got) == sorted(record(n)["commit"] for n in (1, 2))
    assert len(history_of(remote)) == 2


def test_attempts_exhausted_is_an_infrastructure_error_and_loses_nobody_elses_record(tmp_path: Path,
                                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    remote = bare_remote(tmp_path)
    others = iter(range(10, 20))

    def always_beaten(attempt: int) -> None:
        pub.publish(str(remote), BRANCH, [record(next(others))])

    with pytest.raises(pub.PublishError, match="3 attempts each lost the race"):
        pub.publish(str(remote), BRANCH, [record(1)], attempts=3, before_push=always_beaten, sleep=lambda s: None)
    assert [r["commit"] for r in branch_records(remote, tmp_path)] == [record(n)["commit"] for n in (10, 11, 12)]


def test_a_push_refused_for_another_reason_is_not_retried(tmp_path: Path) -> None:
    """A hook (or missing permission) refusing the push is not a lost race: exit 3 at once, with git's words."""
    remote = bare_remote(tmp_path)
    hook = remote / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'protected branch: pushes need a review' >&2\nexit 1\n")
    hook.chmod(0o755)
    calls: list[int] = []
    with pytest.raises(pub.PublishError, match="protected branch"):
        pub.publish(str(remote), BRANCH, [record(1)], before_push=calls.append)
    assert calls == [1]


def test_main_publishes_a_record_file_and_reports_a_lost_cause_as_exit_3(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    remote = bare_remote(tmp_path)
    lines = tmp_path / "records.jsonl"
    lines.write_text("".join(json.dumps(record(n)) + "\n" for n in (1, 2)))
    args = Namespace(store_branch=BRANCH, record_from=str(lines), remote=str(remote), attempts="2",
                     store=str(tmp_path / "store"), commit=None)
    assert pub.main(args) == EXIT_PASSED
    assert "2 record(s) appended" in capsys.readouterr().out
    assert store.read(tmp_path / "store") == [record(1), record(2)]
    (remote / "hooks" / "pre-receive").write_text("#!/bin/sh\nexit 1\n")
    (remote / "hooks" / "pre-receive").chmod(0o755)
    assert pub.main(args) == EXIT_INFRA
    assert "infrastructure error: git push" in capsys.readouterr().err


def test_a_remote_name_is_read_from_the_repository_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    remote = bare_remote(tmp_path)
    work = tmp_path / "work"
    git("init", "--quiet", str(work))
    git("remote", "add", "origin", "../remote.git", cwd=work)  # relative, as a checkout's config may hold
    monkeypatch.chdir(work)
    url = pub.resolve_remote("origin")
    assert Path(url) == remote.resolve()
    pub.publish(url, BRANCH, [record(1)])
    assert git("status", "--porcelain", cwd=work) == ""  # the caller's checkout untouched
    assert git("branch", "--list", cwd=work) == ""
    with pytest.raises(UsageError, match="--remote 'upstream' is not a remote"):
        pub.resolve_remote("upstream")


@pytest.mark.parametrize(("field", "value", "message"), [
    ("store_branch", "bad..name", "--store-branch must be a git branch name"),
    ("store_branch", "-x", "--store-branch must be a git branch name"),
    ("attempts", "0", "--attempts must be a whole number from 1 to 50"),
    ("attempts", "many", "--attempts must be a whole number from 1 to 50"),
    ("record_from", "missing.json", "cannot read it"),
])
def test_bad_input_is_one_line_naming_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, field: str, value: str,
                                              message: str) -> None:
    monkeypatch.chdir(tmp_path)
    given = {"store_branch": BRANCH, "record_from": "r.jsonl", "remote": str(bare_remote(tmp_path)), "attempts": None,
             "store": None, "commit": None, field: value}
    (tmp_path / "r.jsonl").write_text(json.dumps(record(1)) + "\n")
    with pytest.raises(UsageError, match=message) as caught:
        pub.main(Namespace(**given))
    assert "\n" not in str(caught.value)


def test_a_file_that_is_neither_report_nor_records_is_bad_input(tmp_path: Path) -> None:
    bad = tmp_path / "notes.txt"
    bad.write_text("hello\n[1, 2]\n")
    with pytest.raises(UsageError, match=r"neither a report\.json nor history records"):
        pub.load_records(bad)


@pytest.mark.parametrize(("output", "lost"), [
    ("To remote.git\n!\tabc:refs/heads/h\t[rejected] (fetch first)\nDone\n", True),
    ("!\tabc:refs/heads/h\t[rejected] (non-fast-forward)\n", True),
    ("!\tabc:refs/heads/h\t[remote rejected] (cannot lock ref 'refs/heads/h': is at 1 but expected 2)\n", True),
    ("!\tabc:refs/heads/h\t[remote rejected] (pre-receive hook declined)\n", False),
    ("fatal: Authentication failed for 'https://github.com/o/r/'\n", False),
])
def test_lost_race_reads_gits_push_output(output: str, lost: bool) -> None:
    assert pub.lost_race(output) is lost


def test_credentials_in_a_remote_url_are_never_shown() -> None:
    assert pub._shown("https://x-access-token:SECRET@github.com/o/r") == "https://github.com/o/r"


def test_a_report_becomes_a_record_with_this_runners_identity_and_a_bisection_joins_it(tmp_path: Path) -> None:
    """--record-from a real report.json (history.record.from_report builds the record here) and --bisect-report a real
    bisection: the published record carries both, and the record schema accepts it."""
    report = tmp_path / "report.json"
    report.write_text(comparison("2.13.0", "2.14.0.dev20261203+cpu", latency("mlp", 1.2), correctness("mlp")))
    found = tmp_path / "bisect.json"
    write_bisection(Bisection(tool_version="t", command=["torch-upgrade-check", "bisect"], started="s", device="cpu",
                              checks=["mlp[cpu-float32]/latency"], builds=["a", "b"], outcome="found",
                              reason="first bad build: 2.14.0.dev20261203 (last good: 2.14.0.dev20261202)",
                              last_good="2.14.0.dev20261202", first_bad="2.14.0.dev20261203"), found)
    remote = bare_remote(tmp_path)
    args = Namespace(store_branch=BRANCH, record_from=str(report), remote=str(remote), attempts=None,
                     store=str(tmp_path / "store"), commit="c" * 40, bisect_report=str(found))
    assert pub.main(args) == EXIT_PASSED
    (got,) = branch_records(remote, tmp_path)
    assert got["commit"] == "c" * 40 and got["identity"] == rec.runner_identity()
    assert got["torch"]["candidate"]["version"].startswith("2.14.0.dev20261203")
    assert got["bisect"] == {"outcome": "found", "last_good": "2.14.0.dev20261202", "first_bad": "2.14.0.dev20261203",
                             "reason": "first bad build: 2.14.0.dev20261203 (last good: 2.14.0.dev20261202)"}
    schema = json.loads((Path(__file__).resolve().parents[1] / "schema" / "history-record.schema.json").read_text())
    jsonschema.validate(got, schema)


def test_a_bisect_report_that_is_not_one_is_bad_input(tmp_path: Path) -> None:
    (tmp_path / "r.jsonl").write_text(json.dumps(record(1)) + "\n")
    (tmp_path / "b.json").write_text("{}")
    args = Namespace(store_branch=BRANCH, record_from=str(tmp_path / "r.jsonl"), remote=str(bare_remote(tmp_path)),
                     attempts=None, store=None, commit=None, bisect_report=str(tmp_path / "b.json"))
    with pytest.raises(UsageError, match=r"--bisect-report: .* is not a version"):
        pub.main(args)


def test_publish_flags_register_on_a_parser_with_store_and_commit() -> None:
    """The `history` parser owns --store and --commit; publish's flags join it without a clash."""
    import argparse

    p = argparse.ArgumentParser()
    p.add_argument("--store")
    p.add_argument("--commit")
    pub.add_arguments(p)
    args = p.parse_args(["--store", "s", "--store-branch", "b", "--record-from", "r", "--attempts", "3"])
    assert (args.store_branch, args.record_from, args.remote, args.attempts) == ("b", "r", "origin", "3")


def test_a_push_whose_tip_moved_after_gits_own_look_is_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The race inside `git push` itself: git has read the remote's tip, then another job's commit lands, then git
    sends its update (from a pre-push hook, the last moment before it does). The remote refuses the stale update;
    the publisher reads that as a lost race and lands on the new tip."""
    remote = bare_remote(tmp_path)
    pub.publish(str(remote), BRANCH, [record(1)])
    other = tmp_path / "other"
    git("clone", "--quiet", "--branch", BRANCH, str(remote), str(other))
    (other / "records.jsonl").write_text((other / "records.jsonl").read_text() + json.dumps(record(2)) + "\n")
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "pre-push").write_text(f"""#!/bin/sh
[ -e "{tmp_path}/done" ] && exit 0
touch "{tmp_path}/done"
unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE
cd "{other}" && git -c user.name=o -c user.email=o@example.com commit -qam other \\
  && git -c core.hooksPath=/dev/null push -q origin {BRANCH}
""")
    (hooks / "pre-push").chmod(0o755)
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "core.hooksPath")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", str(hooks))
    done = pub.publish(str(remote), BRANCH, [record(3)], sleep=lambda s: None)
    assert done.attempts == 2
    assert [r["commit"] for r in branch_records(remote, tmp_path)] == [record(n)["commit"] for n in (1, 2, 3)]
