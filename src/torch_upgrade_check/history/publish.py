"""`history publish`: append records to the history store on a branch of a git remote, retrying when another job pushed first.

The store lives at the root of its own branch (github-action-benchmark's convention), created as an orphan
branch on first use. Every attempt starts from the remote's tip as it is now: fetch it, check its files out
into a private folder, append with `history.store.append`, commit on top of that tip and push without force.
A push the remote rejects because another job pushed first (or held the ref's lock) is retried from a fresh
fetch after a random pause, so each record is appended to whatever others wrote and nobody's commit is ever
rewritten. The work happens in a private bare repository in a temporary folder: the caller's checkout, its
index and its branches are never touched, and no git identity needs configuring.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch_upgrade_check.errors import EXIT_INFRA, EXIT_PASSED, UsageError
from torch_upgrade_check.history import record, store
from torch_upgrade_check.schema import SchemaError, read_bisection

RECORD_SCHEMA = record.SCHEMA
READABLE = record.READABLE  # a record file an older tool wrote (a runner not yet upgraded) is published as it is
DEFAULT_ATTEMPTS = 5
MAX_ATTEMPTS = 50
# The pause before attempt n is uniform in [0, BASE * 2**n), capped: two jobs that collided once rarely
# collide again, and a dozen matrix jobs finishing together still land within a minute or so.
JITTER_BASE_S = 0.5
JITTER_CAP_S = 20.0
GIT_TIMEOUT_S = 300
PROG = "torch-upgrade-check"
# Who commits, when the caller's environment names nobody: GitHub's own bot address, as actions commonly use.
BOT_NAME = "github-actions[bot]"
BOT_EMAIL = "41898282+github-actions[bot]@users.noreply.github.com"


class PublishError(Exception):
    """git could not fetch, commit or push for a reason other than a lost race: exit 3 with git's own words."""


@dataclass(frozen=True)
class Published:
    """What one publish did: the commit now at the branch's tip and how many attempts it took."""

    commit: str
    attempts: int


def add_arguments(p: argparse.ArgumentParser) -> None:
    """publish's own flags, for the `history` parser (which has `--store` and `--commit` already)."""
    p.add_argument("--store-branch", default=None, metavar="BRANCH",
                   help="publish: the branch of the remote holding the store (made, as an orphan, on first use)")
    p.add_argument("--record-from", default=None, metavar="FILE",
                   help="publish: the report.json compare wrote (a record is built with this runner's identity), or "
                        "records `history --append` wrote")
    p.add_argument("--remote", default="origin", metavar="NAME_OR_URL",
                   help="publish: the git remote, a name of the repository here or a URL (default: origin)")
    p.add_argument("--attempts", default=None, metavar="N",
                   help=f"publish: pushes tried when another job pushed first (default: {DEFAULT_ATTEMPTS})")
    p.add_argument("--bisect-report", default=None, metavar="FILE",
                   help="publish: a report.json `bisect` wrote after this run's alarm; its answer joins the record")


def main(args: Any) -> int:
    """`history publish` with parsed arguments (store_branch, record_from, remote, attempts; optional store,
    commit, bisect_report): exit 0 published, 2 bad input, 3 git could not publish."""
    if not getattr(args, "store_branch", None) or not getattr(args, "record_from", None):
        raise UsageError("history publish needs --store-branch BRANCH and --record-from REPORT_JSON (the report.json "
                         "compare wrote, or records `history --append` wrote)")
    attempts = _attempts(getattr(args, "attempts", None))
    records = load_records(Path(args.record_from), commit=getattr(args, "commit", None))
    if getattr(args, "bisect_report", None):
        answer = bisect_answer(Path(args.bisect_report))
        records = [{**item, "bisect": answer} for item in records]
    store_out = getattr(args, "store", None)
    try:
        branch = _branch(str(args.store_branch))
        remote = resolve_remote(str(getattr(args, "remote", None) or "origin"))
        done = publish(remote, branch, records, attempts=attempts,
                       store_out=Path(store_out) if store_out else None)
    except PublishError as e:
        print(f"{PROG}: infrastructure error: {e}", file=sys.stderr, flush=True)
        return EXIT_INFRA
    say(f"{PROG}: history: {len(records)} record(s) appended to {branch} at {done.commit[:12]} "
        f"(attempt {done.attempts} of {attempts})")
    return EXIT_PASSED


def say(text: str) -> None:
    print(text, flush=True)


def _branch(name: str) -> str:
    proc = _run(["git", "check-ref-format", "--branch", name])
    if proc.returncode != 0 or not name or name.startswith("-"):
        raise UsageError(f"--store-branch must be a git branch name like torch-upgrade-check-history, got {name!r}")
    return name


def _attempts(value: object) -> int:
    if value is None:
        return DEFAULT_ATTEMPTS
    try:
        n = int(str(value))
    except ValueError:
        n = 0
    if not 1 <= n <= MAX_ATTEMPTS:
        raise UsageError(f"--attempts must be a whole number from 1 to {MAX_ATTEMPTS}, got {value!r}")
    return n


def load_records(path: Path, *, commit: str | None = None) -> list[dict]:
    """The records to append: from a record file (`history --append`'s JSON lines, or one record as JSON), or
    built from a report.json with this runner's identity (`history.record.from_report`)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise UsageError(f"--record-from {path}: cannot read it ({e.strerror}); give the report.json compare wrote, "
                         "or a record file `history --append` wrote") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = None
    if isinstance(data, dict) and data.get("schema") in READABLE:
        return [data]
    if isinstance(data, dict):
        return [record.here(data, commit)]
    records = _json_lines(text)
    if records:
        return records
    raise UsageError(f"--record-from {path}: neither a report.json nor history records ({RECORD_SCHEMA}); give the "
                     "report.json compare wrote, or a record file `history --append` wrote")


def bisect_answer(path: Path) -> dict[str, Any]:
    """What a bisection found, as the record's `bisect` holds it: outcome, last good and first bad build, why."""
    try:
        found = read_bisection(path)
    except SchemaError as e:
        raise UsageError(f"--bisect-report: {e}") from None
    answer: dict[str, Any] = {"outcome": found.outcome, "last_good": found.last_good, "first_bad": found.first_bad,
                              "reason": found.reason}
    if found.compare_url:
        answer["compare_url"] = found.compare_url
    return answer


def _json_lines(text: str) -> list[dict]:
    """Every line a record of our schema, else nothing (a half-matching file is not guessed at)."""
    out = []
    for line in filter(None, (ln.strip() for ln in text.splitlines())):
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            return []
        if not (isinstance(item, dict) and item.get("schema") in READABLE):
            return []
        out.append(item)
    return out


def resolve_remote(remote: str) -> str:
    """A remote's URL: a name (`origin`) is read from the current repository's config; a URL or path as given."""
    if "/" in remote or ":" in remote or remote.endswith(".git"):
        return remote
    proc = _run(["git", "remote", "get-url", remote])
    if proc.returncode != 0 or not proc.stdout.strip():
        raise UsageError(f"--remote {remote!r} is not a remote of the repository here; run in the checkout, or give "
                         "the remote's URL (for example https://github.com/OWNER/REPO)")
    url = proc.stdout.strip()
    # a relative path in the caller's config means relative to the caller's folder, not ours
    return str(Path(url).resolve()) if Path(url).exists() else url


def publish(remote: str, branch: str, records: list[dict], *, attempts: int = DEFAULT_ATTEMPTS,
            store_out: Path | None = None, before_push: Callable[[int], None] | None = None,
            sleep: Callable[[float], None] = time.sleep) -> Published:
    """Append `records` to the store on `branch` of `remote`, pushing without force; retried on a lost race.

    `before_push(attempt)` runs after the commit is made and before it is pushed (the tests use it to let
    another publisher land first). `store_out`, when given, receives the store as pushed.
    """
    with _private_repo() as (git_dir, work):
        for attempt in range(1, attempts + 1):
            tip = _fetch(git_dir, remote, branch)
            tree = work / f"attempt-{attempt}"
            _checkout(git_dir, tip, tree)
            for item in records:
                store.append(tree, item)
            commit = _commit(git_dir, tree, tip, _message(records))
            if before_push:
                before_push(attempt)
            if _push(git_dir, remote, commit, branch):
                if store_out is not None:
                    _replace_dir(tree, store_out)
                return Published(commit, attempt)
            if attempt < attempts:
                pause = random.uniform(0, min(JITTER_CAP_S, JITTER_BASE_S * 2 ** attempt))
                say(f"{PROG}: history: {branch} moved while publishing (another job pushed first); "
                    f"attempt {attempt + 1} of {attempts} in {pause:.1f}s")
                sleep(pause)
        raise PublishError(f"{branch} on {_shown(remote)} kept moving: {attempts} attempts each lost the race to another "
                           "job's push; nothing was overwritten and this run's record is not in the store (rerun "
                           "the job, or raise --attempts)")


@contextmanager
def _private_repo() -> Iterator[tuple[Path, Path]]:
    with tempfile.TemporaryDirectory(prefix="tuc-history-") as tmp:
        git_dir = Path(tmp) / "repo.git"
        _git(["init", "--quiet", "--bare", str(git_dir)])
        yield git_dir, Path(tmp)


def _fetch(git_dir: Path, remote: str, branch: str) -> str | None:
    """The branch's tip on the remote now, fetched; None when the branch does not exist yet."""
    listed = _git(["--git-dir", str(git_dir), "ls-remote", "--heads", remote, f"refs/heads/{branch}"])
    if not listed.strip():
        return None
    # the tip alone: a year of nightly commits need not cross the network to append one line
    _git(["--git-dir", str(git_dir), "fetch", "--quiet", "--no-tags", "--depth", "1", remote,
          f"+refs/heads/{branch}:refs/remotes/store/{branch}"])
    return _git(["--git-dir", str(git_dir), "rev-parse", f"refs/remotes/store/{branch}"]).strip()


def _checkout(git_dir: Path, tip: str | None, tree: Path) -> None:
    """The tip's files into `tree` (an empty folder for a branch not made yet), through a private index."""
    tree.mkdir(parents=True)
    if tip is None:
        return
    env = {"GIT_INDEX_FILE": str(tree.parent / f"{tree.name}.index")}
    _git(["--git-dir", str(git_dir), "--work-tree", str(tree), "read-tree", "-u", "--reset", tip], env=env)


def _commit(git_dir: Path, tree: Path, parent: str | None, message: str) -> str:
    env = {"GIT_INDEX_FILE": str(tree.parent / f"{tree.name}.index"), **_identity()}
    base = ["--git-dir", str(git_dir), "--work-tree", str(tree)]
    _git([*base, "add", "--all", "."], env=env, cwd=tree)
    tree_id = _git([*base, "write-tree"], env=env).strip()
    parents = ["-p", parent] if parent else []  # no parent: the orphan branch's first commit
    return _git([*base, "commit-tree", tree_id, *parents, "-m", message], env=env).strip()


def _push(git_dir: Path, remote: str, commit: str, branch: str) -> bool:
    """True when the remote took the commit; False when it refused because the branch moved (a lost race)."""
    proc = _run(["git", "--git-dir", str(git_dir), "push", "--porcelain", remote, f"{commit}:refs/heads/{branch}"])
    if proc.returncode == 0:
        return True
    if lost_race(proc.stdout + proc.stderr):
        return False
    raise PublishError(f"git push to {_shown(remote)} failed: {_tail(proc)}")


def lost_race(output: str) -> bool:
    """Whether git's push output says the branch moved under us (rather than auth, network or a hook refusing)."""
    rejected = any(word in output for word in ("[rejected]", "non-fast-forward", "fetch first"))
    locked = "[remote rejected]" in output and any(
        word in output for word in ("lock", "cannot update ref", "failed to update ref", "incorrect old value"))
    return rejected or locked


def _message(records: list[dict]) -> str:
    first = records[0] if records else {}
    cand = (first.get("torch") or {}).get("candidate") or {}
    version = cand.get("version") if isinstance(cand, dict) else None
    return f"torch-upgrade-check history: {len(records)} record(s)" + (f", candidate torch {version}" if version else "")


def _identity() -> dict[str, str]:
    """The committer the environment names, else GitHub's bot (a CI runner usually has no git identity)."""
    env = {}
    for role in ("AUTHOR", "COMMITTER"):
        env[f"GIT_{role}_NAME"] = os.environ.get(f"GIT_{role}_NAME") or BOT_NAME
        env[f"GIT_{role}_EMAIL"] = os.environ.get(f"GIT_{role}_EMAIL") or BOT_EMAIL
    return env


def _replace_dir(src: Path, dest: Path) -> None:
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(src, dest)


def _shown(remote: str) -> str:
    """The remote without any credentials a URL might carry (user:token@host)."""
    head, sep, rest = remote.partition("://")
    return f"{head}{sep}{rest.rpartition('@')[2]}" if sep else remote


def _run(argv: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", **(env or {})}  # never wait on a password prompt
    try:
        return subprocess.run(argv, capture_output=True, text=True, env=full_env, cwd=cwd, check=False,
                              timeout=GIT_TIMEOUT_S)
    except FileNotFoundError:
        raise PublishError("git is not installed on this runner (history publish needs it)") from None
    except subprocess.TimeoutExpired:
        raise PublishError(f"{' '.join(argv[:4])} ... took over {GIT_TIMEOUT_S}s (network?)") from None


def _git(argv: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None) -> str:
    proc = _run(["git", *argv], env=env, cwd=cwd)
    if proc.returncode != 0:
        raise PublishError(f"git {_subcommand(argv)} failed: {_tail(proc)}")
    return proc.stdout


def _subcommand(argv: list[str]) -> str:
    """`fetch` of `--git-dir D --work-tree T fetch ...`: what failed, without paths or URLs."""
    rest = list(argv)
    while rest and rest[0] in ("--git-dir", "--work-tree"):
        rest = rest[2:]
    return rest[0] if rest else "?"


def _tail(proc: subprocess.CompletedProcess) -> str:
    """git's last words, with what the remote said (`remote: ...`: a hook's or the server's reason) kept first."""
    lines = [ln.strip() for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip() and ln.strip() != "Done"]
    said = [ln for ln in lines if ln.startswith("remote:")][-3:]
    rest = [ln for ln in lines if not ln.startswith("remote:")][-3:]
    return " | ".join(said + rest) or f"exit {proc.returncode}"
