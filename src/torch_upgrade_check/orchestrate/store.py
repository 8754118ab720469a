"""The venv store kept between runs (stdlib only): a lock per venv, publish-when-complete, an LRU size cap.

Layout under the store's root (`~/.cache/torch-upgrade-check/venvs`, or `pull-requests/` inside it for
runs of untrusted code, see `store_root`):

    torch-2.13.0-<key>--<gen>/     one venv: <key> hashes what decides its contents, <gen> when it was built
    .locks/<venv folder>.lock      its use lock: shared while a run uses it, exclusive to delete it
    .locks/<venv name>.build       held exclusively while one job builds that name: a second job waits
    .locks/store                   held while evicting, so two jobs never evict at once
    .trash/                        where a venv is renamed to before it is deleted

A venv is built at its own new folder (a name no one else knows yet) and published by renaming its
record file into place last, atomically: a folder without a record is a build in progress, or one that
crashed, and is never reused. Venvs are not moved after they are built: Python's docs call venvs not
relocatable (console scripts and `activate` carry the absolute path), so a build-in-temp-then-rename of
the folder itself would leave broken scripts. A published venv never changes; a newer build of the same
name (a refreshed nightly) is a new folder, and the old one is deleted once no run holds it.

Locks are `fcntl.flock` on POSIX (released by the kernel when a process dies, so a killed job never leaves
a venv locked). Elsewhere there is no flock: the store works unlocked there, for one job at a time.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # Windows: no flock; see the module docstring
    fcntl = None  # type: ignore[assignment]

RECORD = "torch-upgrade-check-env.json"
USED = "torch-upgrade-check-used"  # touched on every use: its mtime orders eviction (least recently used first)
PREFIX = "torch-"  # every venv folder starts so; anything else in the root is left alone
UNTRUSTED_DIR = "pull-requests"
# GitHub events that run a pull request's code (its merge commit or head), which may rewrite the venv it runs in.
UNTRUSTED_EVENTS = ("pull_request", "pull_request_target", "pull_request_review", "pull_request_review_comment")
DEFAULT_CAP_GB = 20.0
GB = 1024**3
HEARTBEAT_S = 30.0
BUILD_WAIT_S = 2 * 3600  # longer than one install may take (installer.INSTALL_TIMEOUT_S) plus its verification
EVICT_WAIT_S = 120.0


def default_venv_dir(environ: Mapping[str, str] | None = None) -> Path:
    environ = os.environ if environ is None else environ
    cache = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "torch-upgrade-check" / "venvs"


def untrusted(environ: Mapping[str, str]) -> bool:
    """Whether this run executes a pull request's code (under GitHub Actions)."""
    return environ.get("GITHUB_EVENT_NAME", "") in UNTRUSTED_EVENTS


def store_root(venv_dir: Path, environ: Mapping[str, str]) -> Path:
    """Where this run's venvs live: pull requests get a store of their own, so code from a pull request that
    rewrites its venv's site-packages can never reach a venv that a trusted run (a push, a schedule) reuses."""
    return venv_dir / UNTRUSTED_DIR if untrusted(environ) else venv_dir


@dataclass(frozen=True)
class Lease:
    """A venv this process uses: it holds the venv's shared lock until `release` (or until the process ends)."""

    path: Path
    record: dict[str, Any]
    reused: bool
    fd: int

    def release(self) -> None:
        try:
            os.close(self.fd)
        except OSError:
            pass


class StoreError(Exception):
    """The store cannot do what was asked (a lock held for too long); the caller maps it to an infra error."""


def _lock_file(root: Path, name: str) -> int:
    (root / ".locks").mkdir(parents=True, exist_ok=True)
    return os.open(root / ".locks" / name, os.O_RDWR | os.O_CREAT, 0o644)


def _try(fd: int, kind: str) -> bool:
    if fcntl is None:
        return True
    try:
        fcntl.flock(fd, (fcntl.LOCK_EX if kind == "ex" else fcntl.LOCK_SH) | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _wait(fd: int, kind: str, *, what: str, wait_s: float, say: Callable[[str], None],
          heartbeat_s: float = HEARTBEAT_S) -> None:
    """Take the lock, polling (flock has no timeout), saying every `heartbeat_s` what it waits for."""
    start = time.monotonic()
    next_note = start + heartbeat_s
    while not _try(fd, kind):
        now = time.monotonic()
        if now - start > wait_s:  # the caller owns fd and closes it
            raise StoreError(f"waited {wait_s:.0f} s for {what}; if no job is running, delete its lock file "
                             "under .locks/ in the venv folder")
        if now >= next_note:
            say(f"waiting for {what} ({now - start:.0f} s)")
            next_note = now + heartbeat_s
        time.sleep(min(0.5, heartbeat_s / 4))


def read_record(path: Path) -> dict[str, Any] | None:
    try:
        record = json.loads((path / RECORD).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def _generations(root: Path, name: str) -> list[tuple[float, Path, dict[str, Any]]]:
    """The published venvs of `name`, newest first."""
    found = []
    for path in root.glob(f"{name}--*"):
        record = read_record(path)
        if record is not None:
            found.append((float(record.get("created", 0)), path, record))
    return sorted(found, key=lambda item: item[0], reverse=True)


def _reuse(root: Path, name: str, plan: Any, stale: Callable[[Path, dict[str, Any]], str],
           say: Callable[[str], None]) -> Lease | None:
    """A lease on the newest published venv of `name` when it matches and is fresh, else None."""
    for _, path, record in _generations(root, name):
        if record.get("plan") != plan:
            continue
        why = stale(path, record)
        if why:
            say(f"not reusing {path}: {why}")
            return None
        fd = _lock_file(root, path.name + ".lock")
        try:
            _wait(fd, "sh", what=f"{path} to be released", wait_s=EVICT_WAIT_S, say=say)  # only a deletion holds it
        except StoreError:
            os.close(fd)
            raise
        if read_record(path) is None:  # deleted while we waited for the lock
            os.close(fd)
            continue
        _touch(path)
        return Lease(path, record, True, fd)
    return None


def _touch(path: Path) -> None:
    try:
        (path / USED).touch()
    except OSError:
        pass  # a read-only venv is still usable; its age then counts from when it was built


def acquire(root: Path, name: str, *, plan: Any, stale: Callable[[Path, dict[str, Any]], str],
            build: Callable[[Path], dict[str, Any]], say: Callable[[str], None] = print,
            heartbeat_s: float = HEARTBEAT_S) -> Lease:
    """A venv named `name` whose record's plan is `plan`: the newest published one when `stale(folder, record)` says ""
    (nothing against it), else a new one that `build(folder)` makes (it returns the record). Only one job
    builds a name at a time; a second one waits, then reuses what the first built."""
    root.mkdir(parents=True, exist_ok=True)
    lease = _reuse(root, name, plan, stale, say)
    if lease:
        return lease
    build_fd = _lock_file(root, name + ".build")
    try:
        if not _try(build_fd, "ex"):
            say(f"another build of {name} is under way (the other side's, or another job's); waiting for it")
            _wait(build_fd, "ex", what=f"the other build of {name}", wait_s=BUILD_WAIT_S, say=say,
                  heartbeat_s=heartbeat_s)
            lease = _reuse(root, name, plan, stale, say)  # it finished while we waited
            if lease:
                return lease
        path = root / f"{name}--{time.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(3)}"
        fd = _lock_file(root, path.name + ".lock")
        _try(fd, "sh")  # a name no one else knows yet: held from the start, so eviction never takes it
        try:
            record = {**build(path), "plan": plan, "created": time.time(), "size_bytes": folder_size(path)}
            tmp = path / f".{RECORD}.{os.getpid()}"
            tmp.write_text(json.dumps(record, indent=2))
            os.replace(tmp, path / RECORD)  # the venv exists for others from this moment on
        except BaseException:
            shutil.rmtree(path, ignore_errors=True)  # never leave a half-made venv (it has no record anyway)
            os.close(fd)
            raise
        _touch(path)
        _drop_superseded(root, name, keep=path, say=say)
        return Lease(path, record, False, fd)
    finally:
        os.close(build_fd)


def _drop_superseded(root: Path, name: str, *, keep: Path, say: Callable[[str], None]) -> None:
    """Older builds of a name nobody uses any more (a nightly refreshed); one still in use stays for eviction."""
    for _, path, _ in _generations(root, name):
        if path != keep and _delete_if_unused(root, path):
            say(f"deleted {path}: superseded by {keep.name}")


def _delete_if_unused(root: Path, path: Path) -> bool:
    fd = _lock_file(root, path.name + ".lock")
    try:
        if not _try(fd, "ex"):
            return False
        trash = root / ".trash"
        trash.mkdir(exist_ok=True)
        target = trash / f"{path.name}.{secrets.token_hex(3)}"
        try:
            os.rename(path, target)  # gone from the store at once; the slow part happens in the trash
        except FileNotFoundError:
            return False
        shutil.rmtree(target, ignore_errors=True)
        try:
            os.unlink(root / ".locks" / (path.name + ".lock"))  # a late opener re-checks the record: gone
        except OSError:
            pass
        return True
    finally:
        os.close(fd)


def folder_size(path: Path) -> int:
    """Bytes of the files under `path` (apparent sizes, links not followed; a hard link counts each time)."""
    total = 0
    for dirpath, _, filenames in os.walk(path):
        for name in filenames:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                continue
    return total


@dataclass(frozen=True)
class Entry:
    """One published venv as eviction sees it."""

    path: Path
    size_bytes: int
    last_used: float


def entries(root: Path) -> list[Entry]:
    """Every published venv in the store, least recently used first."""
    found = []
    for path in root.glob(PREFIX + "*"):
        record = read_record(path) if path.is_dir() else None
        if record is None:
            continue
        try:
            used = (path / USED).stat().st_mtime
        except OSError:
            used = float(record.get("created", 0))
        size = record.get("size_bytes")
        found.append(Entry(path, int(size) if isinstance(size, (int, float)) else folder_size(path), used))
    return sorted(found, key=lambda e: e.last_used)


def evict(root: Path, cap_bytes: int, *, say: Callable[[str], None] = print, other_bytes: int = 0) -> list[Path]:
    """Delete least-recently-used venvs until the store (plus `other_bytes`, such as the installer's cache)
    fits `cap_bytes`; a venv in use (its lock held by any job, this one included) is never deleted. Also
    clears what crashed runs left: trash, and builds that never got a record and that no job holds.
    Returns the venvs deleted."""
    if not root.is_dir():
        return []
    fd = _lock_file(root, "store")
    try:
        _wait(fd, "ex", what="another job evicting from the venv store", wait_s=EVICT_WAIT_S, say=say)
    except StoreError as e:
        os.close(fd)
        say(f"venv store not trimmed: {e}")
        return []
    try:
        shutil.rmtree(root / ".trash", ignore_errors=True)
        for path in root.glob(PREFIX + "*"):
            if path.is_dir() and read_record(path) is None and _delete_if_unused(root, path):
                say(f"deleted {path}: an unfinished build")
        found = entries(root)
        total = other_bytes + sum(e.size_bytes for e in found)
        deleted = []
        for entry in found:
            if total <= cap_bytes:
                break
            if _delete_if_unused(root, entry.path):
                total -= entry.size_bytes
                deleted.append(entry.path)
                say(f"deleted {entry.path} ({entry.size_bytes / GB:.1f} GB, last used "
                    f"{time.strftime('%Y-%m-%d', time.localtime(entry.last_used))}): the venv store is over its "
                    f"{cap_bytes / GB:g} GB cap")
        if total > cap_bytes:
            say(f"the venv store holds {total / GB:.1f} GB, over its {cap_bytes / GB:g} GB cap: every venv left is "
                "in use; raise --venv-cap or free disk")
        return deleted
    finally:
        os.close(fd)
