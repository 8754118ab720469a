"""How much of this host's CPUs other processes use (Linux's /proc; elsewhere unknown): compare pins its A/B workers
to the idlest CPUs, and measures, pair by pair, the share of those CPUs that processes other than its own used
(analysis.hostbusy judges a change measured on a busy host)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

PROC = Path("/proc")
IDLE_WINDOW_S = 0.25  # how long the CPUs are watched before the idlest are chosen
SHARE_GRAIN = 0.05  # CPUs whose busy shares differ by less than this are as idle as each other


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


def idlest_cpus(usable: Sequence[int], n: int, *, window_s: float = IDLE_WINDOW_S,
                proc: Path = PROC) -> tuple[tuple[int, ...], dict[int, float]]:
    """The `n` CPUs of `usable` that were least busy over `window_s`, and every usable CPU's busy share; where the
    shares cannot be read, the last `n` (the rule before this one). Of CPUs as idle as each other, the last ones,
    rotated by this process's id: two compares started together on an idle machine see the same shares, and the
    same choice would put both on one CPU."""
    n = max(1, min(n, len(usable)))
    before = cpu_ticks(proc)
    if before is None:
        return tuple(usable[-n:]), {}
    time.sleep(window_s)
    after = cpu_ticks(proc)
    if after is None:
        return tuple(usable[-n:]), {}
    shares = {c: s for c, s in busy_shares(before, after).items() if c in usable}
    turn = os.getpid() % len(usable)
    order = sorted(usable, key=lambda c: (round(shares.get(c, 0.0) / SHARE_GRAIN), (turn - usable.index(c)) % len(usable)))
    return tuple(sorted(order[:n])), shares


def _stat_fields(pid: int, proc: Path) -> list[str] | None:
    try:
        text = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()  # the command's name may hold spaces and brackets


def tree_ticks(pids: Iterable[int], proc: Path = PROC) -> int:
    """CPU ticks (user + system, and their reaped children's) of `pids` and every live descendant."""
    parents: dict[int, int] = {}
    stats: dict[int, list[str]] = {}
    for entry in proc.iterdir() if proc.is_dir() else ():
        if entry.name.isdigit() and (fields := _stat_fields(int(entry.name), proc)) is not None:
            parents[int(entry.name)] = int(fields[1])
            stats[int(entry.name)] = fields
    ours = {p for p in pids if p in stats}
    grew = True
    while grew:
        kids = {p for p, parent in parents.items() if parent in ours and p not in ours}
        ours |= kids
        grew = bool(kids)
    # fields after the name: state(0) ppid(1) ... utime(11) stime(12) cutime(13) cstime(14)
    return sum(int(stats[p][11]) + int(stats[p][12]) + int(stats[p][13]) + int(stats[p][14]) for p in ours)


class Meter:
    """The share of `cpus` that processes other than `ours()` (and this one) used between `start` and `stop`.

    Our own processes' ticks are subtracted whichever CPU they ran on, so the share errs low (a quiet verdict),
    never high."""

    def __init__(self, cpus: Sequence[int], ours: Callable[[], Iterable[int]], proc: Path = PROC) -> None:
        self.cpus, self.ours, self.proc = tuple(cpus), ours, proc
        self._start: tuple[dict[int, tuple[int, int]], int] | None = None

    def _ours(self) -> int:
        me = os.times()
        return tree_ticks(self.ours(), self.proc) + round((me.user + me.system) * os.sysconf("SC_CLK_TCK"))

    def start(self) -> None:
        ticks = cpu_ticks(self.proc) if self.cpus else None
        self._start = (ticks, self._ours()) if ticks is not None else None

    def stop(self) -> float | None:
        """The foreign share of the CPUs since `start` (0 to 1); None where it cannot be read."""
        if self._start is None:
            return None
        before, ours_before = self._start
        after = cpu_ticks(self.proc)
        if after is None:
            return None
        busy = total = 0
        for cpu in self.cpus:
            if cpu in after and cpu in before:
                busy += after[cpu][0] - before[cpu][0]
                total += after[cpu][1] - before[cpu][1]
        if total <= 0:
            return None
        foreign = busy - (self._ours() - ours_before)
        return max(0.0, min(1.0, foreign / total))
