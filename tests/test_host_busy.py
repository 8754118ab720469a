"""A busy host: compare pins its A/B workers (every thread) to the idlest CPUs, reads the share of them other
processes used pair by pair, and where any pair was busy the quiet ones alone decide, or it is `undecided` (host
busy) (issue 46 item 10 and its follow-up)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import user_project
from harness import interpreter
from test_checks_catch_breakage import compared

from torch_upgrade_check.analysis import ab, abjudge, hostbusy
from torch_upgrade_check.model import ABState, CheckSpec, Outcome
from torch_upgrade_check.orchestrate import hostload, measure
from torch_upgrade_check.orchestrate.live import LiveWorker

linux = pytest.mark.skipif(not Path("/proc/stat").exists() or not hasattr(os, "sched_setaffinity"),
                           reason="reads Linux's /proc and pins with sched_setaffinity")
# spins on one CPU (argv[1]) for at most argv[2] seconds; argv[3] threads of it where asked
HOG = """import os, sys, threading, time
os.sched_setaffinity(0, {int(sys.argv[1])})
end = time.time() + float(sys.argv[2])
def spin():
    while time.time() < end:
        pass
for _ in range(int(sys.argv[3]) - 1 if len(sys.argv) > 3 else 0):
    threading.Thread(target=spin).start()
spin()
"""


def pairs(rng: random.Random, ratio: float, n: int, rounds: int = 24) -> list[ab.Batch]:
    out = []
    for _ in range(n):
        base = [1.0 * (1 + rng.gauss(0, 0.02)) for _ in range(rounds)]
        out.append(ab.Batch(tuple(base), tuple(b * ratio * (1 + rng.gauss(0, 0.02)) for b in base), seconds=1.0))
    return out


def test_an_alarm_on_busy_pairs_is_decided_on_the_quiet_ones_and_every_pair_is_counted() -> None:
    """Four quiet pairs that read 1.00x and one busy pair that read 1.6x slower: the quiet ones decide (no regression),
    and the decision still counts the 5 pairs measured (`batches`), the one set aside said apart. The same five
    pairs with no load figure are judged as before, all together."""
    rng = random.Random(4)
    quiet, noisy = pairs(rng, 1.0, 4), pairs(rng, 1.6, 1)
    batches = [*quiet[:2], *noisy, *quiet[2:]]
    shares = [0.01, 0.02, 0.45, 0.0, 0.03]
    plain = ab.decide(batches, 0.10, alpha=ab.run_alpha(1), final=True)
    assert plain.state != ABState.UNCHANGED  # the busy pair alone moved it
    d = hostbusy.decide(batches, shares, 0.10, alpha=ab.run_alpha(1), final=True)
    assert d.state == ABState.UNCHANGED
    assert (d.batches, d.rounds) == (5, 5 * 24) == (plain.batches, plain.rounds)
    assert ("1 of 5 process pairs ran while other processes used over 15% of the pinned CPUs (up to 45%) and was set "
            "aside") in d.why
    assert hostbusy.words(shares)["host_busy_pairs"] == 1
    assert hostbusy.decide(batches, [None] * 5, 0.10, alpha=ab.run_alpha(1), final=True) == plain


def test_a_regression_on_quiet_pairs_still_fails_and_none_quiet_is_undecided_host_busy() -> None:
    rng = random.Random(5)
    slow = pairs(rng, 1.5, 5)
    d = hostbusy.decide(slow, [0.0, 0.3, 0.0, 0.0, 0.0], 0.10, alpha=ab.run_alpha(1), final=True)
    assert d.state == ABState.REGRESSION and "set aside" in d.why and d.batches == 5  # the 4 quiet pairs confirm it
    none_quiet = hostbusy.decide(slow, [0.5] * 5, 0.10, alpha=ab.run_alpha(1), final=True)
    assert none_quiet.state == ABState.UNDECIDED and none_quiet.why.startswith("host busy:")
    assert none_quiet.batches == 5 and not none_quiet.beyond
    assert abjudge.outcome_of(none_quiet) == Outcome.SUSPICIOUS  # a warning, never a regression blamed on torch
    assert abjudge.outcome_of(none_quiet, "fail") == Outcome.SUSPICIOUS  # nor failed as a significant undecided
    assert hostbusy.decide(slow, [0.5] * 5, 0.10, alpha=ab.run_alpha(1), final=False).state == ABState.PENDING
    assert "undecided: host busy: 5 of 5 process pairs" in abjudge.explain(none_quiet, 0.10, str, "latency")


def test_an_undecided_host_busy_check_whose_quiet_pairs_read_beyond_the_threshold_fails_under_undecided_fail() -> None:
    """One quiet pair of five read 1.5x slower and the budget is spent: `undecided` (host busy), carrying the quiet
    pair's estimate, so that `--undecided fail` (the default) fails it as it fails any undecided check beyond the
    threshold and significant at the run's confidence, and `pass` warns. It had a NaN ratio and passed both."""
    slow = pairs(random.Random(5), 1.5, 5)
    one_quiet = hostbusy.decide(slow, [0.5, 0.5, 0.0, 0.5, 0.5], 0.10, alpha=ab.run_alpha(1), final=True)
    assert one_quiet.state == ABState.UNDECIDED and one_quiet.why.startswith("host busy: 4 of 5 process pairs")
    assert "over the 1 quiet one: beyond the threshold in 1 of 1" in one_quiet.why
    assert 1.4 < one_quiet.ratio < 1.6 and one_quiet.beyond and one_quiet.batches == 5
    assert abjudge.outcome_of(one_quiet, "fail") == Outcome.FAILED
    assert abjudge.outcome_of(one_quiet, "pass") == Outcome.SUSPICIOUS
    reason = abjudge.explain(one_quiet, 0.10, str, "latency")
    assert reason.startswith("undecided: latency 1.5") and "host busy: 4 of 5" in reason and "; fails: " in reason


def test_an_unchanged_read_over_busy_pairs_is_not_kept_where_the_quiet_ones_do_not_rule_the_slowdown_out() -> None:
    """Seven busy pairs read 1.00x (a neighbour slowing the baseline as much as torch slowed the candidate) and the one
    quiet pair 1.2x: every pair together read `unchanged`, which was kept. Busy pairs decide nothing: `undecided`
    (host busy) with the quiet pair's estimate, and `pending` while pairs can still be measured."""
    rng = random.Random(8)
    batches = [*pairs(rng, 1.0, 3), *pairs(rng, 1.2, 1), *pairs(rng, 1.0, 4)]
    shares = [0.6, 0.6, 0.6, 0.02, 0.6, 0.6, 0.6, 0.6]
    assert ab.decide(batches, 0.10, alpha=ab.run_alpha(1), final=True).state == ABState.UNCHANGED
    d = hostbusy.decide(batches, shares, 0.10, alpha=ab.run_alpha(1), final=True)
    assert d.state == ABState.UNDECIDED and d.why.startswith("host busy: 7 of 8 process pairs"), d.why
    assert 1.15 < d.ratio < 1.25 and d.batches == 8
    assert hostbusy.decide(batches, shares, 0.10, alpha=ab.run_alpha(1), final=False).state == ABState.PENDING
    none_quiet = hostbusy.decide(batches, [0.6] * 8, 0.10, alpha=ab.run_alpha(1), final=True)
    assert none_quiet.state == ABState.UNDECIDED and "no quiet pair measured the candidate (1.0" in none_quiet.why
    # quiet pairs that rule the slowdown out settle it, however many busy ones there were
    quiet = pairs(rng, 1.0, 4)
    kept = hostbusy.decide([*quiet, *batches], [0.0] * 4 + [0.6] * 8, 0.10, alpha=ab.run_alpha(1), final=True)
    assert kept.state == ABState.UNCHANGED and "8 of 12 process pairs" in kept.why and kept.batches == 12


def test_a_regression_is_only_called_on_a_look_ab_decide_pays_for() -> None:
    """The alpha budget: A/As measured pair by pair as compare does, busy pairs read 1.8x slower (a neighbour on the
    candidate) and set aside at random. Whenever hostbusy.decide calls a regression, ab.decide on the first k quiet
    pairs (k from MIN_PAIRS to MAX_PAIRS, one of the LOOKS it divides alpha by) calls it too: setting pairs aside
    adds no look. And no busy pair's 1.8x is ever called a regression."""
    rng = random.Random(9)
    called = 0
    for _ in range(60):
        batches: list[ab.Batch] = []
        shares: list[float | None] = []
        for n in range(1, ab.MAX_PAIRS + 1):
            noisy = rng.random() < 0.4
            batches += pairs(rng, 1.8 if noisy else 1.0, 1, rounds=12)
            shares.append(0.5 if noisy else 0.0)
            d = hostbusy.decide(batches, shares, 0.10, alpha=0.05, final=n == ab.MAX_PAIRS)
            if d.state == ABState.PENDING:
                continue
            assert d.state != ABState.REGRESSION or ab.decide(
                [b for b, s in zip(batches, shares) if not hostbusy.busy(s)], 0.10, alpha=0.05,
                final=True).state == ABState.REGRESSION
            called += d.state == ABState.REGRESSION
            break
    assert called == 0


def test_a_change_without_busy_pairs_is_left_alone() -> None:
    slow = pairs(random.Random(6), 1.5, 5)
    assert hostbusy.decide(slow, [0.1] * 5, 0.10, alpha=ab.run_alpha(1), final=True).state == ABState.REGRESSION


def test_the_result_keeps_each_pairs_load_and_memory_pairs_stand() -> None:
    """A latency result keeps each pair's foreign share and how many were set aside beside `batches`; peak memory is
    counted, not timed: its pairs are not set aside, and a growth on a busy host stands."""
    t = measure.Track(CheckSpec("w", "latency", "cpu", "float32"), 0.10)
    t.batches = pairs(random.Random(7), 1.0, 4)
    t.busy = [0.0, 0.5, 0.01, None]
    t.samples = {"b": [x for b in t.batches for x in b.baseline], "c": [x for b in t.batches for x in b.candidate]}
    t.metrics = {"b": {}, "c": {}}
    t.decision = hostbusy.decide(t.batches, t.busy_shares, 0.10, alpha=ab.run_alpha(1), final=True)
    _, cand = abjudge.results(t, {})
    assert cand.metrics["host_busy_shares"] == [0.0, 0.5, 0.01, None]
    assert (cand.metrics["host_busy_pairs"], cand.metrics["batches"]) == (1, 4)
    assert cand.metrics["host_busy_limit"] == hostbusy.BUSY_SHARE
    grown = ab.Batch((1e6,) * 3, (2e6,) * 3, exact=True, seconds=1.0)
    memory = measure.Track(CheckSpec("w", "memory", "cpu", "float32"), 0.10)
    memory.batches, memory.busy = [grown] * 4, [0.9] * 4
    assert memory.busy_shares == []
    d = hostbusy.decide(memory.batches, memory.busy_shares, 0.10, alpha=ab.run_alpha(1), final=True,
                        floor=memory.floor, increase="growth")
    assert d.state == ABState.REGRESSION


def test_stat_is_read_as_the_kernel_writes_it(tmp_path: Path) -> None:
    (tmp_path / "stat").write_text("cpu  10 0 10 100 0 0 0 0 0 0\ncpu0 5 0 5 50 0 0 0 0 0 0\n"
                                   "cpu1 5 1 5 40 9 1 1 3 0 0\nintr 1 2 3\n")
    assert hostload.cpu_ticks(tmp_path) == {0: (10, 60), 1: (16, 65)}
    assert hostload.busy_shares({0: (10, 60), 1: (16, 65)}, {0: (10, 160), 1: (66, 115)}) == {0: 0.0, 1: 1.0}
    assert hostload.cpu_ticks(tmp_path / "missing") is None
    assert hostload.idlest_cpus([0, 1, 2], 2, proc=tmp_path / "missing") == ((1, 2), {}, set())


def test_the_ab_pairs_ready_the_cpu_profiler_where_a_memory_check_is_planned() -> None:
    """compare's A/B pairs on the CPU warm what their AB rows ask (memory's cpu_profiler), once, named by the aspect:
    the worker readies the CPU profiler for it before it pins itself (the test below)."""
    from torch_upgrade_check.commands.compare import cpu_warm_up

    memory, latency = (CheckSpec("mlp", a, "cpu", "float32") for a in ("memory", "latency"))
    assert cpu_warm_up([latency, memory, CheckSpec("tiny", "memory", "cpu", "float32")]) == ("memory",)
    assert cpu_warm_up([latency, CheckSpec("mlp", "compile-time", "cpu", "float32")]) == ()


@linux
def test_every_thread_of_an_ab_worker_is_pinned(tmp_path: Path, torch_python: str) -> None:
    """The worker pins itself after torch imported and the CPU profiler warmed (they are slow, and two workers on one
    CPU would pay them in turn): the threads started by then (its watchdog, torch's pools) are pinned too, not only
    the main thread; a thread left on another CPU would be subtracted from the pinned CPUs' time by the meter."""
    cpu = measure.usable_cpus()[-1]
    w = LiveWorker(torch_python, log_dir=tmp_path, name="pinned", threads=1, python_path=[], cpus=[cpu],
                   warm=["memory"])
    w.start()
    try:
        events = w.log_path.with_suffix(".events.jsonl")
        deadline = time.monotonic() + 300
        while '"hello"' not in events.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert w.proc is not None and w.proc.poll() is None, w.log_path.read_text()[-2000:]
        masks = {t: os.sched_getaffinity(t) for t in hostload.threads_of(w.proc.pid)}
    finally:
        w.close()
    assert len(masks) > 1 and all(m == {cpu} for m in masks.values()), masks


@linux
def test_the_meter_reads_a_hog_as_others_and_pins_the_threads_it_counts_as_ours() -> None:
    """A real process of two spinning threads, first pinned to one CPU: watched by a meter that counts it as another's
    load and by one that names it as ours (which first pins both its threads to the metered CPU), over the same
    second. Whatever else the machine runs, their difference is the hog's own share of that CPU."""
    cpus = measure.usable_cpus()
    target = cpus[-1]
    hog = subprocess.Popen([sys.executable, "-c", HOG, str(cpus[0]), "30", "2"])
    try:
        time.sleep(0.5)
        others = hostload.Meter([target], lambda: [], away=True)
        ours = hostload.Meter([target], lambda: [hog.pid], away=True)
        ours.start()  # pins the hog's threads to `target`
        assert len(cpus) == 1 or ours.moved == 2
        assert {frozenset(os.sched_getaffinity(t)) for t in hostload.threads_of(hog.pid)} == {frozenset({target})}
        ours.start()
        assert ours.moved == 0
        before_ticks, before_cpu = hostload.tree_ticks([hog.pid]), hostload.cpu_ticks()
        others.start()
        time.sleep(1.0)
        foreign, mine = others.stop(), ours.stop()
        hog_ticks, after_cpu = hostload.tree_ticks([hog.pid]), hostload.cpu_ticks()
        assert before_cpu is not None and after_cpu is not None and foreign is not None and mine is not None
        hog_share = (hog_ticks - before_ticks) / (after_cpu[target][1] - before_cpu[target][1])
        assert hog_share > 0.05, hog_share  # it ran at all
        assert foreign >= hog_share - 0.05, (foreign, hog_share)
        assert abs((foreign - mine) - hog_share) < 0.1, (foreign, mine, hog_share)
    finally:
        hog.kill()
        hog.wait()


@linux
def test_the_orchestrator_steps_aside_from_the_pinned_cpus_and_comes_back() -> None:
    cpus = measure.usable_cpus()
    mine = os.sched_getaffinity(0)
    with hostload.aside(cpus[-1:]) as away:
        assert away == (len(cpus) > 1)
        if away:
            assert all(cpus[-1] not in os.sched_getaffinity(t) for t in hostload.threads_of(os.getpid()))
    with hostload.aside(cpus) as away:
        assert not away
    assert os.sched_getaffinity(0) == mine


WIDE = """import torch


def wide():
    layers = []
    for _ in range(3):
        layers += [torch.nn.Linear(1024, 1024), torch.nn.GELU()]
    return torch.nn.Sequential(*layers), (torch.randn(256, 1024),)
"""
TEAM = "workloads:\n  - name: wide\n    factory: wide_model:wide\n    aspects: [latency]\n    dtypes: [float32]\n"


@linux
@pytest.mark.serial  # its verdicts are timings: run alone, after the parallel phase
def test_a_neighbour_busy_while_the_candidate_computes_is_not_blamed_on_torch(tmp_path: Path, torch_python: str) -> None:
    """Another process spins on the pinned CPU exactly while the candidate's model computes (the busy-neighbour
    breakage: a second runner's job on a shared machine): the candidate reads about 2x slower, which was a latency
    regression blamed on torch (exit 1). Now every pair is read as busy and the check is undecided (host busy)."""
    user_project(tmp_path / "team", {"wide_model": WIDE}, TEAM)
    busy = str(interpreter(torch_python, tmp_path / "py", breaks=["busy-neighbour"]))
    code, cand = compared(torch_python, busy, tmp_path / "out", "wide[float32]/latency", extra=("--ab-budget", "5"),
                          cwd=tmp_path / "team")
    lat = cand["wide[float32]/latency"]
    m = lat["metrics"]
    assert (code, lat["outcome"], m["change"]) == (0, "suspicious", "undecided"), lat["reason"]
    assert lat["reason"].startswith("undecided: host busy: "), lat["reason"]
    assert m["host_busy_pairs"] == m["batches"] >= 1 and min(m["host_busy_shares"]) > hostbusy.BUSY_SHARE, m
    for report in ("junit.xml", "summary.md"):  # what the team reads says why
        assert "host busy: " in (tmp_path / "out" / report).read_text(), report


@linux
@pytest.mark.serial
def test_an_aa_beside_a_hog_on_every_cpu_is_never_blamed_on_torch(tmp_path: Path, torch_python: str) -> None:
    """A process spinning at 100% on every CPU this test may use (whichever the compare picks) through an A/A: the
    meter reads its pairs as busy, and the check passes (on quiet pairs) or is undecided (host busy), never a
    regression."""
    user_project(tmp_path / "team", {"wide_model": WIDE}, TEAM)
    hogs = [subprocess.Popen([sys.executable, "-c", HOG, str(c), "300"]) for c in measure.usable_cpus()]
    try:
        code, cand = compared(torch_python, torch_python, tmp_path / "out", "wide[float32]/latency",
                              extra=("--ab-budget", "5"), cwd=tmp_path / "team")
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    lat = cand["wide[float32]/latency"]
    m = lat["metrics"]
    assert code == 0 and m["change"] in ("unchanged", "undecided"), lat["reason"]
    assert m["change"] == "unchanged" or "host busy: " in lat["reason"], lat["reason"]
    assert 1 <= m["host_busy_pairs"] <= m["batches"] == len(m["host_busy_shares"]), m


def slower_beside_a_neighbour(tmp_path: Path, torch_python: str, neighbour_pairs: str,
                              *extra: str) -> tuple[int, dict, Path]:
    """compare of a candidate whose addmm runs twice (the wide workload's forward 2.4x slower, one thread: a real regression)
    against the same torch with a neighbour spinning on the pinned CPU while the *baseline* computes, in the A/B
    pairs `neighbour_pairs` names ("" every pair): each busy pair's baseline slowed about as much as the candidate.
    Its exit code, the latency result, and the temp folder compare ran with (where its CPU claims lie)."""
    user_project(tmp_path / "team", {"wide_model": WIDE}, TEAM)
    options = {"TUC_NEIGHBOUR_PAIRS": neighbour_pairs} if neighbour_pairs else {}
    base = str(interpreter(torch_python, tmp_path / "base-py", breaks=["busy-neighbour"], options=options))
    cand = str(interpreter(torch_python, tmp_path / "cand-py", breaks=["addmm-slower"], options={"TUC_OP_SLOWER": "2"}))
    temp = tmp_path / "temp"
    temp.mkdir()
    code, res = compared(base, cand, tmp_path / "out", "wide[float32]/latency", extra=("--ab-budget", "5", *extra),
                         cwd=tmp_path / "team", env={"TMPDIR": str(temp)})
    return code, res["wide[float32]/latency"], temp


@linux
@pytest.mark.serial
def test_a_slowdown_hidden_by_a_neighbour_on_the_baseline_is_not_read_unchanged(tmp_path: Path,
                                                                              torch_python: str) -> None:
    """The busy neighbour's mirror: it spins while the baseline computes, in every pair, and the candidate really is
    2.4x slower. Every pair is busy and reads about 1.0x: compare read `unchanged` ("1.15x faster ... a slowdown of
    more than 4.8% is ruled out", passed) in 1 of 2 runs on the loaded machine, `undecided` in the other. Busy pairs
    decide nothing now: `undecided` (host busy), a warning that says what the busy pairs read. Once measuring is
    over, compare gives its CPU claims back (they stayed until a later compare found the process gone)."""
    code, lat, temp = slower_beside_a_neighbour(tmp_path, torch_python, "")
    m = lat["metrics"]
    assert (code, lat["outcome"], m["change"]) == (0, "suspicious", "undecided"), lat["reason"]
    assert lat["reason"].startswith("undecided: host busy: "), lat["reason"]
    assert "no quiet pair measured the candidate (" in lat["reason"], lat["reason"]
    assert m["host_busy_pairs"] == m["batches"] >= 1 and min(m["host_busy_shares"]) > hostbusy.BUSY_SHARE, m
    assert list((temp / hostload.CLAIMS.name).glob("cpu*-*")) == []


@linux
@pytest.mark.serial
def test_a_slowdown_seen_on_the_one_quiet_pair_fails_under_undecided_fail(tmp_path: Path, torch_python: str) -> None:
    """The same slower candidate, the neighbour on the baseline in pairs 2 to 8 only: pair 1 measured the 2.4x alone,
    and every later pair, busy, read about 1.0x. The quiet pair settles nothing within the budget: `undecided` (host
    busy), which had no estimate (NaN) and passed under `--undecided fail` (the default); it now carries the quiet
    pair's estimate, beyond the threshold and significant at the run's confidence, and fails. Pair 1 is quiet only
    where the machine is: on a machine busy without the neighbour, this test says so and skips; so it does where a pair
    the neighbour spun in read quiet (its process, started with each pair, was late: CI saw 5 of 6 such pairs busy
    once), after checking what holds then too: the slowdown is not passed."""
    code, lat, _ = slower_beside_a_neighbour(tmp_path, torch_python, "2-8")
    m = lat["metrics"]
    assert m["change"] == "undecided" and lat["outcome"] != "passed", lat["reason"]
    shares = m["host_busy_shares"]
    assert m["batches"] >= 2 and len(shares) == m["batches"], m
    if shares[0] is None or shares[0] > hostbusy.BUSY_SHARE:
        pytest.skip(f"the machine itself kept pair 1 busy ({shares[0]} of its CPU used by others): no quiet pair to "
                    "decide on")
    missed = [i + 1 for i, share in enumerate(shares) if i and (share is None or share <= hostbusy.BUSY_SHARE)]
    if missed:
        pytest.skip(f"pair(s) {missed}, which the neighbour spun in, read quiet ({shares}): not the one-quiet-pair case "
                    f"(the slowdown was not passed: {lat['outcome']})")
    assert m["host_busy_pairs"] == m["batches"] - 1, m
    assert (code, lat["outcome"]) == (1, "failed"), lat["reason"]
    assert "host busy: " in lat["reason"] and "over the 1 quiet one" in lat["reason"], lat["reason"]
    assert m["ratio"] > 1.5 and m["undecided_policy"] == "fail", m


class Sampler:
    """The CPUs' busy ticks and this process tree's (the compare and its workers are ours) every 0.1 s, in a thread:
    others' share of the CPUs over any window of the run, measured apart from compare's own meter."""

    def __init__(self) -> None:
        self.samples: list[tuple[float, dict[int, tuple[int, int]], int]] = []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.done.is_set():
            ticks = hostload.cpu_ticks()
            if ticks is not None:
                self.samples.append((time.time(), ticks, hostload.tree_ticks([os.getpid()])))
            time.sleep(0.1)

    def __enter__(self) -> Sampler:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join()

    def others(self, start: float, end: float) -> float:
        """Others' share from the last sample at or before `start` to the first at or after `end`."""
        before = max((s for s in self.samples if s[0] <= start), key=lambda s: s[0], default=self.samples[0])
        after = min((s for s in self.samples if s[0] >= end), key=lambda s: s[0], default=self.samples[-1])
        busy = sum(after[1][c][0] - before[1][c][0] for c in after[1])
        total = sum(after[1][c][1] - before[1][c][1] for c in after[1])
        return max(0.0, (busy - (after[2] - before[2])) / total) if total else 0.0


def pair_windows(logs: Path, check: str) -> list[tuple[float, float]]:
    """Each fresh pair's timed rounds, from its workers' event logs: the first timed request's start (the first two
    starts are the sides' warm-up rounds) to the end of the last (its start and its observation's duration)."""
    windows = []
    for batch in range(1, 100):
        starts, ends = [], []
        for side in ("baseline", "candidate"):
            events = [json.loads(line) for f in sorted(logs.glob(f"ab-{side}-b{batch}-*.events.jsonl"))
                      for line in f.read_text().splitlines() if line.strip()]
            mine = [e["time"] for e in events if e.get("event") == "start" and e.get("id") == check]
            took = [e["duration_s"] for e in events if e.get("event") == "observation" and e.get("id") == check]
            starts += mine
            ends += [mine[-1] + took[-1]] if mine and took else []
        if len(starts) < 3:
            return windows
        windows.append((sorted(starts)[2], max(ends)))
    return windows


@linux
@pytest.mark.serial
def test_a_quiet_aa_of_a_multithreaded_workload_sets_no_pair_aside(tmp_path: Path, torch_python: str) -> None:
    """Two threads a side on every CPU (the orchestrator cannot step aside there): the workers' own threads and the
    orchestrator's polling are ours, not another's load. Others' share of the CPUs over each pair's timed rounds is
    measured apart (a sampler counting this whole process tree as ours): no pair reads more than that (and a
    sampling slop) as others' use, and where others used little, no pair is set aside. On a busy shared machine the
    second assertion is about that machine's load and is not made (the test says so in its output)."""
    user_project(tmp_path / "team", {"wide_model": WIDE}, TEAM)
    n = len(measure.usable_cpus())
    with Sampler() as sampler:
        code, cand = compared(torch_python, torch_python, tmp_path / "out", "wide[float32]/latency",
                              extra=("--ab-budget", "5", "--threads", str(n)), cwd=tmp_path / "team")
    lat = cand["wide[float32]/latency"]
    m = lat["metrics"]
    read = m["host_busy_shares"]
    apart = [sampler.others(*w) for w in pair_windows(tmp_path / "out" / "logs", "wide[float32]/latency")]
    assert code == 0 and m["batches"] == len(read) == len(apart) >= 1, (m, apart)
    assert all(r <= a + 0.15 for r, a in zip(read, apart)), (read, apart)
    if max(apart) < hostbusy.BUSY_SHARE - 0.05:
        assert m["host_busy_pairs"] == 0, (read, apart, lat["reason"])
    else:
        print(f"others used {[round(a, 3) for a in apart]} of the CPUs in the pairs (compare read {read}): not a quiet "
              "machine")


@linux
def test_two_compares_choosing_together_part_and_a_dead_ones_claim_lapses(tmp_path: Path) -> None:
    """Both see the same idle CPUs; the second to choose passes over what the first (a live process) claimed. A claim
    of a process that ended is ignored and removed."""
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "stat").write_text("cpu0 0 0 0 100 0 0 0 0\ncpu1 0 0 0 100 0 0 0 0\ncpu2 0 0 0 100 0 0 0 0\n")
    claims = tmp_path / "claims"
    claims.mkdir()
    first = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (claims / f"cpu2-{first.pid}").touch()  # the first compare chose CPU 2
        chosen, _, taken = hostload.idlest_cpus([0, 1, 2], 1, window_s=0.0, proc=proc, claims=claims)
        assert taken == {2} and chosen != (2,), chosen
        mine = f"{os.getpid()}-{hostload.started(os.getpid())}"  # the pid and its start time
        assert (claims / f"cpu{chosen[0]}-{mine}").exists()
        both, _, _ = hostload.idlest_cpus([0, 1, 2], 3, window_s=0.0, proc=proc, claims=claims)
        assert both == (0, 1, 2)  # too few unclaimed: the claimed one too
        assert sorted(f.name for f in claims.glob(f"cpu*-{mine}")) == [f"cpu{c}-{mine}" for c in both]
    finally:
        first.kill()
        first.wait()
    assert hostload.claimed(claims) == set() and not (claims / f"cpu2-{first.pid}").exists()


@linux
def test_a_claim_is_held_by_its_process_not_its_pid_and_given_back(tmp_path: Path) -> None:
    """A claim names its process by pid and start time: a pid the kernel has given to another process since (a live
    process, another start time) holds nothing, and its claim is removed; the process itself holds it. A process
    that claims again gives back what it claimed before, and `release` gives back the rest (the compare's measuring
    is over though it lives on: its claims kept an idle CPU from later compares until it ended)."""
    claims = tmp_path / "claims"
    claims.mkdir()
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        start = hostload.started(other.pid)
        assert start is not None and start.isdigit()
        (claims / f"cpu1-{other.pid}-{start}").touch()  # its own claim
        (claims / f"cpu2-{other.pid}-{int(start) - 1}").touch()  # an ended process's, whose pid it now has
        assert hostload.claimed(claims) == {1}
        assert not (claims / f"cpu2-{other.pid}-{int(start) - 1}").exists()
    finally:
        other.kill()
        other.wait()
    hostload.claim(claims, [0, 3])
    hostload.claim(claims, [2])
    mine = f"{os.getpid()}-{hostload.started(os.getpid())}"
    assert sorted(f.name for f in claims.glob(f"cpu*-{mine}")) == [f"cpu2-{mine}"]
    hostload.release(claims)
    assert list(claims.glob(f"cpu*-{mine}")) == []


@linux
def test_the_log_says_which_cpus_and_why() -> None:
    cpus = measure.usable_cpus()
    chosen, why = measure.pinned_cpus(1)
    assert len(chosen) == 1 and chosen[0] in cpus
    if len(cpus) > 1:
        assert why.startswith(f"the idlest of {len(cpus)} over 0.25 s (busy ") and f"{chosen[0]}: " in why, why
    assert measure.pinned_cpus(len(cpus)) == (tuple(cpus), f"all {len(cpus)} this process may use ({len(cpus)} threads)")
