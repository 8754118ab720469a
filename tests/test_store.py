"""The venv store with small fake venvs (a dummy python and a payload file; no torch): reuse, locks between
processes, publish-when-complete, refresh of moving specs, the LRU size cap, pull requests kept apart."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from torch_upgrade_check.orchestrate import provision, store

SRC = Path(__file__).resolve().parents[1] / "src"
PLAN = {"requirement": "torch==2.13.0"}
MB = 1024**2


def fake_build(version: str = "2.13.0", size: int = 1000, log: list[Path] | None = None):
    """A build function that makes a fake venv: bin/python (a dummy script) and a payload of `size` bytes."""
    def build(path: Path) -> dict[str, Any]:
        (path / "bin").mkdir(parents=True)
        (path / "bin" / "python").write_text("#!/bin/sh\nexit 0\n")
        (path / "payload").write_bytes(b"x" * size)
        if log is not None:
            log.append(path)
        return {"torch": {"version": version}}
    return build


def fresh(path: Path, record: dict[str, Any]) -> str:
    return ""


def test_a_venv_is_built_once_then_reused(tmp_path: Path) -> None:
    built: list[Path] = []
    first = store.acquire(tmp_path, "torch-2.13.0-abc", plan=PLAN, stale=fresh, build=fake_build(log=built), say=print)
    second = store.acquire(tmp_path, "torch-2.13.0-abc", plan=PLAN, stale=fresh, build=fake_build(log=built), say=print)
    assert (first.reused, second.reused) == (False, True)
    assert first.path == second.path == built[0] and len(built) == 1
    record = json.loads((first.path / store.RECORD).read_text())
    assert record["plan"] == PLAN and record["torch"]["version"] == "2.13.0" and record["size_bytes"] >= 1000
    first.release()
    second.release()


def test_a_failed_build_leaves_nothing_behind(tmp_path: Path) -> None:
    def broken(path: Path) -> dict[str, Any]:
        fake_build()(path)
        raise RuntimeError("pip failed")

    with pytest.raises(RuntimeError, match="pip failed"):
        store.acquire(tmp_path, "torch-x-abc", plan=PLAN, stale=fresh, build=broken, say=print)
    assert not list(tmp_path.glob("torch-*"))


def test_a_folder_without_its_record_is_never_reused_and_is_cleared_when_no_one_holds_it(tmp_path: Path) -> None:
    crashed = tmp_path / "torch-x-abc--20260101T000000-aaaaaa"
    fake_build()(crashed)  # a build killed before its record was published
    built: list[Path] = []
    lease = store.acquire(tmp_path, "torch-x-abc", plan=PLAN, stale=fresh, build=fake_build(log=built), say=print)
    assert not lease.reused and built == [lease.path] and lease.path != crashed
    store.evict(tmp_path, 10**12, say=print)
    assert not crashed.exists() and lease.path.exists()
    lease.release()


def test_a_build_in_progress_is_not_cleared(tmp_path: Path) -> None:
    """A folder being built has no record yet, but its builder holds its lock: eviction leaves it alone."""
    def build(path: Path) -> dict[str, Any]:
        fake_build()(path)
        store.evict(tmp_path, 0, say=print)  # another job trimming the store meanwhile
        assert path.exists()
        return {"torch": {"version": "2.13.0"}}

    lease = store.acquire(tmp_path, "torch-x-abc", plan=PLAN, stale=fresh, build=build, say=print)
    assert (lease.path / store.RECORD).exists()
    lease.release()


HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from torch_upgrade_check.orchestrate import store
    root, marker = Path(sys.argv[1]), Path(sys.argv[2])
    def build(path):
        (path / "bin").mkdir(parents=True)
        (path / "bin" / "python").write_text("")
        with open(marker, "a") as f:
            f.write("built\\n")
        time.sleep(1.5)  # long enough for the other job to find the name being built
        return {"torch": {"version": "2.13.0"}}
    lease = store.acquire(root, "torch-2.13.0-abc", plan={"requirement": "torch==2.13.0"},
                          stale=lambda p, r: "", build=build, say=print)
    print("path", lease.path, "reused", lease.reused, flush=True)
""")


def test_two_jobs_asking_for_the_same_venv_build_it_once(tmp_path: Path) -> None:
    marker = tmp_path / "builds.txt"
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    jobs = [subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path / "venvs"), str(marker)], env=env,
                             stdout=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [job.communicate(timeout=60)[0] for job in jobs]
    assert all(job.returncode == 0 for job in jobs), outs
    assert marker.read_text() == "built\n", "the second job waited for the first one's build and reused it"
    paths = {line.split()[1] for out in outs for line in out.splitlines() if line.startswith("path ")}
    assert len(paths) == 1
    assert sorted(line.split()[-1] for out in outs for line in out.splitlines() if line.startswith("path ")) == \
        ["False", "True"]
    assert any("another build of torch-2.13.0-abc is under way" in out for out in outs), outs


def test_a_venv_in_use_is_never_deleted(tmp_path: Path) -> None:
    old = store.acquire(tmp_path, "torch-a-1", plan=PLAN, stale=fresh, build=fake_build(size=3 * MB), say=print)
    os.utime(old.path / store.USED, (time.time() - 3600, time.time() - 3600))  # the least recently used
    new = store.acquire(tmp_path, "torch-b-1", plan=PLAN, stale=fresh, build=fake_build(size=3 * MB), say=print)
    new.release()
    lines: list[str] = []
    deleted = store.evict(tmp_path, 4 * MB, say=lines.append)  # room for one: `old` is in use, so `new` goes
    assert deleted == [new.path] and old.path.exists()
    old.release()
    assert store.evict(tmp_path, 1 * MB, say=lines.append) == [old.path]
    assert any("over its" in line for line in lines)


def test_the_cap_evicts_least_recently_used_first(tmp_path: Path) -> None:
    paths = []
    for i, name in enumerate(("torch-a-1", "torch-b-1", "torch-c-1", "torch-d-1")):
        lease = store.acquire(tmp_path, name, plan=PLAN, stale=fresh, build=fake_build(size=2 * MB), say=print)
        lease.release()
        os.utime(lease.path / store.USED, (1_000_000 + i, 1_000_000 + i))
        paths.append(lease.path)
    # b used again recently: now a, c, d are older
    os.utime(paths[1] / store.USED, (2_000_000, 2_000_000))
    deleted = store.evict(tmp_path, int(4.5 * MB), say=print)
    assert deleted == [paths[0], paths[2]]
    assert sorted(p.name for p in tmp_path.glob("torch-*")) == sorted([paths[1].name, paths[3].name])
    assert not (tmp_path / ".trash").exists() or not any((tmp_path / ".trash").iterdir())
    assert store.evict(tmp_path, 100 * MB, say=print) == []  # under the cap: nothing goes


def test_other_bytes_count_toward_the_cap(tmp_path: Path) -> None:
    lease = store.acquire(tmp_path, "torch-a-1", plan=PLAN, stale=fresh, build=fake_build(size=MB), say=print)
    lease.release()
    assert store.evict(tmp_path, 2 * MB, say=print, other_bytes=0) == []
    assert store.evict(tmp_path, 2 * MB, say=print, other_bytes=2 * MB) == [lease.path]


def test_a_stale_venv_is_rebuilt_and_the_old_one_goes_when_unused(tmp_path: Path) -> None:
    lines: list[str] = []
    first = store.acquire(tmp_path, "torch-nightly-1", plan=PLAN, stale=fresh,
                          build=fake_build("2.15.0.dev20260101"), say=lines.append)
    in_use = first  # a job still running with yesterday's nightly

    def stale(path: Path, record: dict[str, Any]) -> str:
        return "" if record["torch"]["version"] == "2.15.0.dev20260102" else "the index now has 2.15.0.dev20260102"

    second = store.acquire(tmp_path, "torch-nightly-1", plan=PLAN, stale=stale, build=fake_build("2.15.0.dev20260102"),
                           say=lines.append)
    assert not second.reused and second.path != first.path
    assert first.path.exists(), "in use by the other job: kept until it is done"
    assert any("not reusing" in line and "2.15.0.dev20260102" in line for line in lines)
    in_use.release()
    third = store.acquire(tmp_path, "torch-nightly-1", plan=PLAN, stale=stale, build=fake_build("never"), say=print)
    assert third.reused and third.path == second.path
    store.evict(tmp_path, 10 * MB, say=print)  # under the cap, but...
    second.release()
    third.release()
    fourth = store.acquire(tmp_path, "torch-nightly-1", plan=PLAN, stale=lambda p, r: "newer",
                           build=fake_build("2.15.0.dev20260103"), say=print)
    assert not second.path.exists() and not first.path.exists()
    assert [p.name for p in tmp_path.glob("torch-*")] == [fourth.path.name]  # superseded ones deleted at once
    fourth.release()


@pytest.mark.parametrize(("event", "apart"), [("pull_request", True), ("pull_request_target", True),
                                              ("push", False), ("schedule", False), ("", False)])
def test_pull_requests_get_a_store_of_their_own(tmp_path: Path, event: str, apart: bool) -> None:
    root = store.store_root(tmp_path, {"GITHUB_EVENT_NAME": event} if event else {})
    assert (root == tmp_path / store.UNTRUSTED_DIR) is apart
    built = store.acquire(tmp_path / store.UNTRUSTED_DIR, "torch-a-1", plan=PLAN, stale=fresh, build=fake_build(),
                          say=print)
    built.release()
    assert store.entries(tmp_path) == []  # the trusted store never sees (nor evicts, nor reuses) a PR's venv
    assert [e.path for e in store.entries(tmp_path / store.UNTRUSTED_DIR)] == [built.path]


def _venv(tmp_path: Path) -> Path:
    path = tmp_path / "v"
    fake_build()(path)
    return path


NOW = 1_800_000_000.0


@pytest.mark.parametrize(("text", "have", "latest", "age_days", "stale"), [
    ("2.13.0", "2.13.0+cpu", None, 400, ""),                                  # pinned: never stale
    ("nightly", "2.15.0.dev20260101+cpu", "2.15.0.dev20260102+cpu", 0.1, "the index now has torch 2.15.0.dev20260102"),
    ("nightly", "2.15.0.dev20260101+cpu", "2.15.0.dev20260101+cpu", 5, ""),  # still the newest: reused
    ("nightly", "2.15.0.dev20260101+cpu", None, 0.5, ""),                    # index unreachable: young enough
    ("nightly", "2.15.0.dev20260101+cpu", None, 1.5, "could not be asked"),  # ...and too old
    ("test", "2.15.0rc1", "2.15.0rc2", 0.1, "the index now has torch 2.15.0rc2"),
    ("test", "2.15.0rc1", None, 4, "a test venv is rebuilt after 3 days"),
    (">=2.13,<2.15", "2.13.0", "2.14.1", 0.1, "the index now has torch 2.14.1"),
    (">=2.13,<2.15", "2.14.1", None, 6, ""),
])
def test_moving_specs_are_refreshed(tmp_path: Path, text: str, have: str, latest: str | None, age_days: float,
                                    stale: str) -> None:
    spec = provision.parse_spec(text, "--candidate")
    record = {"torch": {"version": have}, "created": NOW - age_days * 86400}
    why = provision.staleness(spec, _venv(tmp_path), record, latest=lambda: latest, now=NOW)
    assert (stale in why) if stale else why == "", why


def test_a_venv_without_its_python_is_stale(tmp_path: Path) -> None:
    spec = provision.parse_spec("2.13.0", "--candidate")
    assert provision.staleness(spec, tmp_path / "gone", {}, latest=lambda: None) == "its python is missing"


def test_pinned_versions_never_ask_the_index(tmp_path: Path) -> None:
    def never() -> str | None:
        raise AssertionError("a pinned version must not cost a dry run")

    assert provision.staleness(provision.parse_spec("2.13.0", "x"), _venv(tmp_path), {}, latest=never) == ""


def test_the_store_is_stdlib_only() -> None:
    import ast

    tree = ast.parse((SRC / "torch_upgrade_check" / "orchestrate" / "store.py").read_text())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert all(name.split(".")[0] in sys.stdlib_module_names for name in names), names


def test_uvs_cache_is_pruned_before_any_venv_is_evicted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "uv-cache"
    cache.mkdir()
    (cache / "wheel").write_bytes(b"w" * 3 * MB)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "uv").write_text('#!/bin/sh\n[ "$1 $2 $3" = "cache prune --ci" ] && /bin/rm -f "$UV_CACHE_DIR/wheel"\n')
    (bindir / "uv").chmod(0o755)
    monkeypatch.setenv("PATH", str(bindir))
    monkeypatch.setenv("UV_CACHE_DIR", str(cache))
    lease = store.acquire(tmp_path / "venvs", "torch-a-1", plan=PLAN, stale=fresh, build=fake_build(size=2 * MB),
                          say=print)
    lease.release()
    provision.trim(tmp_path / "venvs", 4 * MB / store.GB, say=print)  # 5 MB in all: over the cap
    assert not (cache / "wheel").exists() and lease.path.exists()


def test_a_build_lock_held_too_long_is_a_store_error_not_a_crash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # _wait once closed the lock's fd and acquire closed it again: an OSError hid the StoreError (and, with both
    # sides provisioning in threads, could close the other side's lock)
    import fcntl

    monkeypatch.setattr(store, "BUILD_WAIT_S", 0.2)
    fd = store._lock_file(tmp_path, "torch-a.build")
    fcntl.flock(fd, fcntl.LOCK_EX)  # another job building the same name (flock is per open file)
    try:
        with pytest.raises(store.StoreError, match="waited 0 s for the other build of torch-a"):
            store.acquire(tmp_path, "torch-a", plan=PLAN, stale=fresh, build=fake_build(), say=lambda _: None,
                          heartbeat_s=0.05)
    finally:
        os.close(fd)
