"""A busy host: compare pins its A/B workers to the idlest CPUs, reads the share of them other processes used pair by
pair, and an alarm raised on busy pairs is decided again on the quiet ones (issue 46 item 10)."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import user_project
from harness import interpreter
from test_checks_catch_breakage import compared

from torch_upgrade_check.analysis import ab, abjudge, hostbusy
from torch_upgrade_check.model import ABState, CheckSpec, Outcome
from torch_upgrade_check.orchestrate import hostload, measure

linux = pytest.mark.skipif(not Path("/proc/stat").exists() or not hasattr(os, "sched_setaffinity"),
                           reason="reads Linux's /proc and pins with sched_setaffinity")
HOG = "import os, sys, time\nos.sched_setaffinity(0, {int(sys.argv[1])})\nend = time.time() + 30\nwhile time.time() < end: pass\n"


def pairs(rng: random.Random, ratio: float, n: int, rounds: int = 24) -> list[ab.Batch]:
    out = []
    for _ in range(n):
        base = [1.0 * (1 + rng.gauss(0, 0.02)) for _ in range(rounds)]
        out.append(ab.Batch(tuple(base), tuple(b * ratio * (1 + rng.gauss(0, 0.02)) for b in base), seconds=1.0))
    return out


def test_an_alarm_on_busy_pairs_is_decided_on_the_quiet_ones() -> None:
    """Four quiet pairs that read 1.00x and one busy pair that read 1.6x slower: the quiet ones decide (no regression);
    the same five pairs with no load figure are judged as before, all together."""
    rng = random.Random(4)
    quiet, noisy = pairs(rng, 1.0, 4), pairs(rng, 1.6, 1)
    batches = [*quiet[:2], *noisy, *quiet[2:]]
    shares = [0.01, 0.02, 0.45, 0.0, 0.03]
    d = hostbusy.decide(batches, shares, 0.10, alpha=ab.run_alpha(1), final=True)
    assert d.state == ABState.UNCHANGED
    assert "1 of 5 process pairs ran on a busy host (others used up to 45% of the pinned CPUs) and were set aside" in d.why
    plain = hostbusy.decide(batches, [None] * 5, 0.10, alpha=ab.run_alpha(1), final=True)
    assert plain == ab.decide(batches, 0.10, alpha=ab.run_alpha(1), final=True)


def test_a_regression_on_quiet_pairs_still_fails_and_none_quiet_is_undecided_host_busy() -> None:
    rng = random.Random(5)
    slow = pairs(rng, 1.5, 5)
    d = hostbusy.decide(slow, [0.0, 0.3, 0.0, 0.0, 0.0], 0.10, alpha=ab.run_alpha(1), final=True)
    assert d.state == ABState.REGRESSION and "set aside" in d.why  # the 4 quiet pairs confirm it
    none_quiet = hostbusy.decide(slow, [0.5] * 5, 0.10, alpha=ab.run_alpha(1), final=True)
    assert none_quiet.state == ABState.UNDECIDED and none_quiet.why.startswith("host busy:")
    assert abjudge.outcome_of(none_quiet) == Outcome.SUSPICIOUS  # a warning, never a regression blamed on torch
    assert hostbusy.decide(slow, [0.5] * 5, 0.10, alpha=ab.run_alpha(1), final=False).state == ABState.PENDING
    assert "undecided: host busy: 5 of 5 process pairs" in abjudge.explain(none_quiet, 0.10, str, "latency")


def test_a_change_without_busy_pairs_is_left_alone() -> None:
    rng = random.Random(6)
    slow = pairs(rng, 1.5, 5)
    assert hostbusy.decide(slow, [0.1] * 5, 0.10, alpha=ab.run_alpha(1), final=True).state == ABState.REGRESSION


def test_the_result_keeps_each_pairs_load() -> None:
    t = measure.Track(CheckSpec("w", "latency", "cpu", "float32"), 0.10)
    rng = random.Random(7)
    t.batches = pairs(rng, 1.0, 4)
    t.busy = [0.0, 0.5, 0.01, None]
    t.samples = {"b": [x for b in t.batches for x in b.baseline], "c": [x for b in t.batches for x in b.candidate]}
    t.metrics = {"b": {}, "c": {}}
    t.decision = hostbusy.decide(t.batches, t.busy, 0.10, alpha=ab.run_alpha(1), final=True)
    _, cand = abjudge.results(t, {})
    assert cand.metrics["host_busy_shares"] == [0.0, 0.5, 0.01, None]
    assert cand.metrics["host_busy_pairs"] == 1 and cand.metrics["host_busy_limit"] == hostbusy.BUSY_SHARE


def test_stat_is_read_as_the_kernel_writes_it(tmp_path: Path) -> None:
    (tmp_path / "stat").write_text("cpu  10 0 10 100 0 0 0 0 0 0\ncpu0 5 0 5 50 0 0 0 0 0 0\n"
                                   "cpu1 5 1 5 40 9 1 1 3 0 0\nintr 1 2 3\n")
    assert hostload.cpu_ticks(tmp_path) == {0: (10, 60), 1: (16, 65)}
    assert hostload.busy_shares({0: (10, 60), 1: (16, 65)}, {0: (10, 160), 1: (66, 115)}) == {0: 0.0, 1: 1.0}
    assert hostload.cpu_ticks(tmp_path / "missing") is None
    assert hostload.idlest_cpus([0, 1, 2], 2, proc=tmp_path / "missing") == ((1, 2), {})


@linux
@pytest.mark.serial
def test_a_cpu_hog_is_measured_as_foreign_load_and_the_idlest_cpus_are_chosen() -> None:
    """A real process spinning on one CPU: the meter reads most of that CPU as others' use, none of it once the hog
    is named as ours; the idlest-CPU choice leaves that CPU out (a machine of two or more CPUs)."""
    cpus = measure.usable_cpus()
    target = cpus[-1]
    hog = subprocess.Popen([sys.executable, "-c", HOG, str(target)])
    try:
        time.sleep(0.3)
        meter = hostload.Meter([target], lambda: [])
        meter.start()
        time.sleep(1.0)
        share = meter.stop()
        assert share is not None and share > 0.6, share
        ours = hostload.Meter([target], lambda: [hog.pid])
        ours.start()
        time.sleep(1.0)
        mine = ours.stop()
        assert mine is not None and mine < 0.3, mine
        if len(cpus) >= 2:
            chosen, shares = hostload.idlest_cpus(cpus, 1)
            assert target not in chosen and shares[target] > 0.6, shares
            assert measure.pinned_cpus(1) != (target,)
    finally:
        hog.kill()
        hog.wait()


WIDE = """import torch


def wide():
    layers = []
    for _ in range(3):
        layers += [torch.nn.Linear(1024, 1024), torch.nn.GELU()]
    return torch.nn.Sequential(*layers), (torch.randn(256, 1024),)
"""


@linux
@pytest.mark.serial  # its verdicts are timings: run alone, after the parallel phase
def test_a_neighbour_busy_while_the_candidate_computes_is_not_blamed_on_torch(tmp_path: Path, torch_python: str) -> None:
    """Another process spins on the pinned CPU exactly while the candidate's model computes (the busy-neighbour
    breakage: a second runner's job on a shared machine): the candidate reads about 2x slower, which was a latency
    regression blamed on torch. Now every pair is read as busy and the check is undecided (host busy), a warning."""
    user_project(tmp_path / "team", {"wide_model": WIDE},
                 "workloads:\n  - name: wide\n    factory: wide_model:wide\n    aspects: [latency]\n    dtypes: [float32]\n")
    busy = str(interpreter(torch_python, tmp_path / "py", breaks=["busy-neighbour"]))
    code, cand = compared(torch_python, busy, tmp_path / "out", "wide[float32]/latency", extra=("--ab-budget", "5"),
                          cwd=tmp_path / "team")
    lat = cand["wide[float32]/latency"]
    m = lat["metrics"]
    assert (code, lat["outcome"], m["change"]) == (0, "suspicious", "undecided"), lat["reason"]
    assert lat["reason"].startswith("undecided: host busy: "), lat["reason"]
    assert m["host_busy_pairs"] == m["batches"] >= 1 and min(m["host_busy_shares"]) > hostbusy.BUSY_SHARE, m
