"""How much of this host's CPUs other processes use (Linux's /proc; elsewhere unknown): compare pins its A/B workers
to the idlest CPUs and measures, pair by pair, the share of those CPUs that processes other than its own used
(analysis.hostbusy judges a change measured on a busy host).

The share is the pinned CPUs' busy time (/proc/stat) less the time of the two workers and everything they started
(/proc/<pid>/stat of each, its threads and reaped children included). That subtraction is exact only where every
thread counted as ours ran on the pinned CPUs and nothing of ours ran there uncounted: so each pair's meter first
pins every thread of both workers' process trees to those CPUs (a thread or a compile worker started before the
worker pinned itself would otherwise run, and be subtracted, elsewhere), and moves the orchestrator's own threads off
them while it measures; where it cannot (the pinned CPUs are all it may use), its own time is subtracted too.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

PROC = Path("/proc")
IDLE_WINDOW_S = 0.25  # how long the CPUs are watched before the idlest are chosen
SHARE_GRAIN = 0.05  # CPUs whose busy shares differ by less than this are as idle as each other
# Which compare on this machine pinned to which CPU: a file a CPU naming the process that chose it. Two compares
# started together see the same idle CPUs; the second to choose passes over what the first claimed.
CLAIMS = Path(tempfile.gettempdir()) / "torch-upgrade-check-cpus"


def cpu_ticks(proc: Path = PROC) -> dict[int, tuple[int, int]] | None:
    """Each CPU's (busy, total) clock ticks since boot from /proc/stat; None where there is no /proc.

    Busy is user, nice, system, irq, softirq and steal (a hypervisor giving the vCPU to another guest is another
    tenant's use too); idle and iowait are not busy. guest time is already inside user."""
    try:
        lines = (proc / "stat").read_text().splitlines()
    except OSError:
        return None
    ticks: dict[int, tuple[int, int]] = {}
    for line in lines:
        name, _, rest = line.partition(" ")
        if not name.startswith("cpu") or name == "cpu":
            continue
        fields = [int(x) for x in rest.split()[:8]]
        fields += [0] * (8 - len(fields))
        user, nice, system, idle, iowait, irq, softirq, steal = fields
        busy = user + nice + system + irq + softirq + steal
        ticks[int(name[3:])] = (busy, busy + idle + iowait)
    return ticks or None


def busy_shares(before: dict[int, tuple[int, int]], after: dict[int, tuple[int, int]]) -> dict[int, float]:
    """Each CPU's busy share between two readings (0 for a CPU whose clock did not move)."""
    shares = {}
    for cpu, (busy, total) in after.items():
        b0, t0 = before.get(cpu, (busy, total))
        shares[cpu] = (busy - b0) / (total - t0) if total > t0 else 0.0
    return shares


def idlest_cpus(usable: Sequence[int], n: int, *, window_s: float = IDLE_WINDOW_S, proc: Path = PROC,
                claims: Path | None = CLAIMS) -> tuple[tuple[int, ...], dict[int, float], set[int]]:
    """The `n` CPUs of `usable` that were least busy over `window_s` and not claimed by another live compare
    (`claims`; claimed ones only where too few are left), every usable CPU's busy share, and the claimed CPUs; where
    the shares cannot be read, the last `n` (the rule before this one). Of CPUs as idle as each other, the last
    ones, rotated by this process's id."""
    n = max(1, min(n, len(usable)))
    before = cpu_ticks(proc)
    after = None
    if before is not None:
        time.sleep(window_s)
        after = cpu_ticks(proc)
    if before is None or after is None:
        return tuple(usable[-n:]), {}, set()
    shares = {c: s for c, s in busy_shares(before, after).items() if c in usable}
    turn = os.getpid() % len(usable)
    with _locked(claims) as folder:
        taken = claimed(folder)
        # a claimed CPU is passed over even while it looks idle: its compare's workers may not have started yet
        order = sorted(usable, key=lambda c: (c in taken, round(shares.get(c, 0.0) / SHARE_GRAIN),
                                              (turn - usable.index(c)) % len(usable)))
        chosen = tuple(sorted(order[:n]))
        claim(folder, chosen)
    return chosen, shares, taken & set(usable)


@contextlib.contextmanager
def _locked(folder: Path | None) -> Iterator[Path | None]:
    """`folder` (made world-writable: runners of other users share the machine) under an exclusive lock; None where
    either cannot be had (then no claim is read or made)."""
    if folder is None:
        yield None
        return
    try:
        import fcntl

        folder.mkdir(mode=0o1777, exist_ok=True)
        with contextlib.suppress(OSError):
            folder.chmod(0o1777)
        lock = os.open(folder / "lock", os.O_CREAT | os.O_RDONLY, 0o644)  # flock needs no write access
    except (ImportError, OSError):
        yield None
        return
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield folder
    finally:
        os.close(lock)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process
        return True
    return True


def started(pid: int, proc: Path = PROC) -> str | None:
    """When `pid` started (clock ticks after boot, /proc/<pid>/stat's 22nd field); None where it cannot be read."""
    fields = _stat_fields(proc / str(pid) / "stat")
    return fields[19] if fields is not None and len(fields) > 19 else None


def holds(pid: int, start: str | None) -> bool:
    """Whether the process that claimed as (`pid`, `start`) still lives: a pid the kernel gave to another process
    since (its start time differs) does not hold the claim, nor keep its CPU from every later compare."""
    if not alive(pid):
        return False
    now = started(pid)
    return start is None or now is None or now == start


def _mine() -> str:
    """This process's claim tag: its pid and start time (a pid alone is reused once its process ends)."""
    start = started(os.getpid())
    return f"{os.getpid()}-{start}" if start is not None else str(os.getpid())


def claimed(folder: Path | None) -> set[int]:
    """The CPUs a live process other than this one claimed in `folder`; a claim whose process ended (or whose pid
    another process has now) is removed."""
    taken: set[int] = set()
    for f in folder.glob("cpu*-*") if folder is not None else ():
        cpu, _, tag = f.name[3:].partition("-")
        pid, _, start = tag.partition("-")  # "cpu3-1234-98765"; "cpu3-1234" from a release before start times
        if not (cpu.isdigit() and pid.isdigit()) or tag == _mine():
            continue
        if holds(int(pid), start or None):
            taken.add(int(cpu))
        else:
            with contextlib.suppress(OSError):
                f.unlink()  # its compare ended
    return taken


def claim(folder: Path | None, cpus: Iterable[int]) -> None:
    """Claim `cpus` for this process in place of what it claimed before (a process measures on one set of CPUs at a
    time; the claim lapses when it ends, or when it calls `release`)."""
    if folder is None:
        return
    release(folder)
    for cpu in cpus:
        with contextlib.suppress(OSError):
            (folder / f"cpu{cpu}-{_mine()}").touch()


def release(folder: Path | None = CLAIMS) -> None:
    """Give back this process's claims: its measuring is over though it lives on (attribution done, reports and the
    team's tests to come), and a compare started meanwhile must not pass over an idle CPU for a busy one."""
    mine = _mine()
    for f in folder.glob("cpu*-*") if folder is not None and folder.is_dir() else ():
        if f.name[3:].partition("-")[2] == mine:
            with contextlib.suppress(OSError):
                f.unlink()


def _stat_fields(path: Path) -> list[str] | None:
    try:
        text = path.read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()  # the command's name may hold spaces and brackets


def tree(pids: Iterable[int], proc: Path = PROC) -> dict[int, list[str]]:
    """`pids` and every live descendant, each with its /proc/<pid>/stat fields after the name."""
    stats: dict[int, list[str]] = {}
    for entry in proc.iterdir() if proc.is_dir() else ():
        if entry.name.isdigit() and (fields := _stat_fields(entry / "stat")) is not None:
            stats[int(entry.name)] = fields
    ours = {p for p in pids if p in stats}
    grew = True
    while grew:
        kids = {p for p, f in stats.items() if int(f[1]) in ours and p not in ours}
        ours |= kids
        grew = bool(kids)
    return {p: stats[p] for p in ours}


def tree_ticks(pids: Iterable[int], proc: Path = PROC) -> int:
    """CPU ticks (user + system, every thread's, and their reaped children's) of `pids` and every live descendant."""
    # fields after the name: state(0) ppid(1) ... utime(11) stime(12) cutime(13) cstime(14)
    return sum(int(f[11]) + int(f[12]) + int(f[13]) + int(f[14]) for f in tree(pids, proc).values())


def threads_of(pid: int, proc: Path = PROC) -> list[int]:
    try:
        return [int(t.name) for t in (proc / str(pid) / "task").iterdir() if t.name.isdigit()]
    except OSError:
        return []


def pin_tree(pids: Iterable[int], cpus: Sequence[int], proc: Path = PROC) -> int:
    """Pin every thread of `pids` and their live descendants to `cpus` (sched_setaffinity pins one thread: a pool
    started before the pin keeps its own mask); how many threads had another mask. A thread gone meanwhile is
    skipped."""
    moved, want = 0, set(cpus)
    for pid in tree(pids, proc):
        for tid in threads_of(pid, proc):
            try:
                if os.sched_getaffinity(tid) != want:
                    os.sched_setaffinity(tid, want)
                    moved += 1
            except OSError:
                pass
    return moved


@contextlib.contextmanager
def aside(cpus: Sequence[int]) -> Iterator[bool]:
    """This process's threads kept off `cpus` while the block runs (its polling would be counted as another's load
    there, and slow what is measured); their masks restored after. Yields whether it could: not where `cpus` is all
    this process may use, nor without sched_setaffinity."""
    if not cpus or not hasattr(os, "sched_setaffinity"):
        yield False
        return
    mine = os.sched_getaffinity(0)
    rest = mine - set(cpus)
    if not rest:
        yield False
        return
    tids = threads_of(os.getpid()) or [0]
    masks: dict[int, set[int]] = {}
    for tid in tids:
        with contextlib.suppress(OSError):
            masks[tid] = os.sched_getaffinity(tid)
            os.sched_setaffinity(tid, rest & masks[tid] or rest)
    try:
        yield True
    finally:
        for tid, mask in masks.items():
            with contextlib.suppress(OSError):
                os.sched_setaffinity(tid, mask)


class Meter:
    """The share of `cpus` that processes other than `ours()` (and this one, where it is not `away` from `cpus`) used
    between `start` and `stop`. `start` pins every thread of `ours()` to `cpus` first: their time is subtracted
    from those CPUs' busy time, so it must have been spent there."""

    def __init__(self, cpus: Sequence[int], ours: Callable[[], Iterable[int]], *, away: bool,
                 proc: Path = PROC) -> None:
        self.cpus, self.ours, self.away, self.proc = tuple(cpus), ours, away, proc
        self.moved = 0  # threads of ours that start found on other CPUs (and pinned)
        self._start: tuple[dict[int, tuple[int, int]], int] | None = None

    def _ours(self) -> int:
        own = 0
        if not self.away:
            me = os.times()  # every thread of this process, not its children (the workers are counted apart)
            own = round((me.user + me.system) * os.sysconf("SC_CLK_TCK"))
        return tree_ticks(self.ours(), self.proc) + own

    def start(self) -> None:
        ticks = cpu_ticks(self.proc) if self.cpus else None
        if ticks is None:
            self._start = None
            return
        self.moved = pin_tree(self.ours(), self.cpus, self.proc)
        self._start = (cpu_ticks(self.proc) or ticks, self._ours())

    def stop(self) -> float | None:
        """The foreign share of the CPUs since `start` (0 to 1); None where it cannot be read."""
        if self._start is None:
            return None
        before, ours_before = self._start
        after, ours_after = cpu_ticks(self.proc), self._ours()
        if after is None:
            return None
        busy = total = 0
        for cpu in self.cpus:
            if cpu in after and cpu in before:
                busy += after[cpu][0] - before[cpu][0]
                total += after[cpu][1] - before[cpu][1]
        if total <= 0:
            return None
        return max(0.0, min(1.0, (busy - (ours_after - ours_before)) / total))
