"""compare's latency, compiled latency, memory and compile-time A/B: batches of interleaved rounds, each batch in a
freshly started worker pair.

Loop batches outside, checks inside: batch 1 measures every A/B check in one new baseline/candidate
pair; each later batch starts a new pair and measures only the checks still unsettled, until each is
settled (analysis.ab) or cannot afford another pair within its budget (then `undecided`). Both sides
run with the same explicit thread count, pinned to the same CPUs, OpenMP's passive waiting (an idle
side's spinning threads would steal the other side's CPU), the garbage collector off while timing,
and the same loop count per sample, calibrated once (batch 1's warm-up round, on the faster side) so
that a sample lasts at least MIN_SAMPLE_S. A compile-time round is one cold compile a side (a fresh
Inductor cache each), judged like latency against its own threshold. A compiled-latency check is a latency check of
the compiled model: the same rounds, budget and threshold; each worker compiles it once, in its warm-up round.

The budget is honest: it counts every second a check's workers spend on it, warm-up rounds included
(a compile-time check's warm-up compiles apart: see Track.counts_warm; they are reported; so is a compiled-latency
check's compile, once a worker: on the busy 2-core machine a fresh A/B worker's first compile of a small MLP took
60 s, which counted would have left no room for the 4 pairs a failure needs).
Each pair is planned from what the earlier ones cost: its rounds from `ab.rounds_for` (few for a
large effect), capped so that the pairs a failure still needs fit in what is left (the first pair
gets a quarter of the budget, one of the ab.MIN_PAIRS a failure needs; the pair itself stops early when
its rounds run longer than planned).
Only the warm-up round calls the workload more than the sample needs: the timed rounds ask for no
extra warm-up call and no separate single-call timing.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from torch_upgrade_check.analysis import ab, hostbusy, stats
from torch_upgrade_check.analysis.abjudge import HOST_FLOOR_BYTES, MEMORY_FLOOR_BYTES
from torch_upgrade_check.aspects import AB_ASPECTS, LATENCY_LIKE, TIMED, ab_of
from torch_upgrade_check.model import ABState, CheckSpec, Observation, Status
from torch_upgrade_check.orchestrate import hostload
from torch_upgrade_check.orchestrate.live import LiveWorker

# a first batch's ABBA rounds, and a confirmation pair's fewest, are each aspect's (aspects.AB: first_rounds, fewer
# when the budget's quarter cannot hold them; least_rounds); a latency round times this many samples a side
LATENCY_SAMPLES = 1
MAX_ROUNDS = 96  # later batches size their rounds from the noise of the earlier ones, up to this
FEWEST_ROUNDS = 2  # a later pair cut short by the budget still measures one whole ABBA cycle
FIRST_FEWEST_ROUNDS = 4  # the first pair two: its rounds are where the round noise is first learnt
WARMUP_ROUNDS = 1  # per check per batch, discarded: caches, allocator and thread pools settle in a new process
MIN_SAMPLE_S = 0.01  # a sample times enough calls to last this long (timer resolution, scheduler jitter)
MAX_BATCHES = ab.MAX_PAIRS
DEFAULT_BUDGET_S = 20.0  # measuring time per check (both sides, warm-ups included) before an unsettled one is undecided
HOST_QUANTUM_BYTES = 2**20  # host samples in whole MiB: KiB-level jitter is not a measurement
HOST_NOISY_ROUNDS = 8  # a batch whose host samples differ needs enough rounds for its own signed-rank test
# A compile-time check's budget: one sample is a whole cold compile, so it is sized from what the check's rounds cost
# once its first pair has measured them: COMPILE_BUDGET_ROUNDS rounds (the fewest a failure needs, 4 + 3 x 2, twice
# over), at least COMPILE_BUDGET_FACTOR latency budgets and at most COMPILE_BUDGET_MOST. A fixed 10 budgets left a 10 s
# compile no room for the 4 pairs a failure needs (docs/benchmarks.md#where-the-ab-constants-come-from).
COMPILE_BUDGET_FACTOR = 10
COMPILE_BUDGET_ROUNDS = 20
COMPILE_BUDGET_MOST = 30
# A latency check's budget is at least what LATENCY_BUDGET_ROUNDS of its own rounds and MIN_PAIRS warm-ups cost, as its
# first pair measured them (the fewest rounds a failure needs, 4 + 3 x 4, twice over), at most LATENCY_BUDGET_MOST
# latency budgets: with a fixed 20 s, from about 0.35 s a forward no second pair fitted, and a failure needs 4
# (docs/benchmarks.md#where-the-ab-constants-come-from).
LATENCY_BUDGET_ROUNDS = 32
LATENCY_BUDGET_MOST = 10


def usable_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))


def default_threads() -> int:
    """compare gives both sides the same explicit CPU thread count: half the CPUs this process may use (at
    least 1), leaving room for the orchestrator and the machine's own noise."""
    return max(1, len(usable_cpus()) // 2)


def pinned_cpus(threads: int) -> tuple[tuple[int, ...], str]:
    """The CPUs both sides are pinned to (the same `threads` CPUs, the idlest this process may use, so that two
    compares on one machine measure on different CPUs where they can), and why those, for the log.

    Measured on a 2-vCPU runner: left to the scheduler, the two workers land on different vCPUs whose
    speed differs for seconds at a time, and round-to-round noise was 12-19%; pinned to one CPU, 2-7%.
    """
    cpus = usable_cpus()
    if threads >= len(cpus):
        return tuple(cpus), f"all {len(cpus)} this process may use ({threads} threads)"
    chosen, shares, taken = hostload.idlest_cpus(cpus, threads)
    if not shares:
        return chosen, "the last ones this process may use (the host's load cannot be read here)"
    seen = ", ".join(f"{c}: {shares[c]:.0%}" for c in cpus if c in shares)
    others = f"; another compare here holds {', '.join(map(str, sorted(taken)))}" if taken else ""
    return chosen, f"the idlest of {len(cpus)} over {hostload.IDLE_WINDOW_S:g} s (busy {seen}{others})"


@dataclass(frozen=True)
class Pair:
    """How to start a fresh baseline/candidate worker pair: the same threads, CPUs and environment on both."""

    baseline: str
    candidate: str
    log_dir: Path
    threads: int | None
    python_path: tuple[str, ...] = ()
    cpus: tuple[int, ...] = ()
    warm: tuple[str, ...] = ()  # what each worker readies before it is pinned (worker.__main__: the CPU profiler)
    # each side's Inductor cache across its pairs (a folder per side below it; None: torch's default). A cold
    # compile is timed in a fresh cache all the same; only a new process's once-a-process work (the compiler's
    # ISA probes: ~15 s of g++ a process here) is then built once a side instead of once a pair.
    cache_dir: Path | None = None
    cpus_why: str = ""  # why those CPUs (pinned_cpus), for the log

    def launch(self, batch: int | str, aspects: Collection[str] = AB_ASPECTS) -> tuple[LiveWorker, LiveWorker]:
        """Start both workers now (they import torch side by side); `start` then measures with them. They ready
        what the batch's `aspects` need of `warm`."""
        env = {"OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")}
        common = {"log_dir": self.log_dir, "threads": self.threads, "python_path": list(self.python_path),
                  "cpus": list(self.cpus), "warm": [w for w in self.warm if w in aspects]}

        def side_env(side: str) -> dict[str, str]:
            cache = {"TORCHINDUCTOR_CACHE_DIR": str(self.cache_dir / side)} if self.cache_dir else {}
            return {**env, **cache}

        b = LiveWorker(self.baseline, name=f"ab-baseline-b{batch}", env=side_env("baseline"), **common)
        c = LiveWorker(self.candidate, name=f"ab-candidate-b{batch}", env=side_env("candidate"), **common)
        b.start()
        try:
            c.start()
        except BaseException:
            close(b)
            raise
        return b, c

    @contextlib.contextmanager
    def start(self, batch: int | str, aspects: Collection[str], launched: tuple[LiveWorker, LiveWorker] | None = None
              ) -> Iterator[tuple[LiveWorker, LiveWorker]]:
        b, c = launched or self.launch(batch, aspects)
        try:
            yield b, c
        finally:
            close(b, c)


def close(*workers: LiveWorker) -> None:
    """Hang up on every worker first, then wait: they tear torch down at the same time."""
    for w in workers:
        w.hang_up()
    for w in workers:
        w.close()


@dataclass
class Track:
    """One A/B check across batches."""

    spec: CheckSpec
    threshold: float
    inner: int = 0
    batches: list[ab.Batch] = field(default_factory=list)
    samples: dict[str, list[float]] = field(default_factory=lambda: {"b": [], "c": []})
    metrics: dict[str, dict] = field(default_factory=lambda: {"b": {}, "c": {}})
    decision: ab.Decision | None = None
    failed: tuple[Observation, Observation] | None = None
    # memory checks: host RAM (peak resident set growth) measured in the same calls, judged alike
    host_batches: list[ab.Batch] = field(default_factory=list)
    host_samples: dict[str, list[float]] = field(default_factory=lambda: {"b": [], "c": []})
    host_decision: ab.Decision | None = None
    next_rounds: int = 0  # planned for the next pair (0: the aspect's first-pair count)
    compile_seconds: float = 0.0  # compiled latency: what its workers spent compiling, neither rounds nor warm-ups
    budget_s: float = DEFAULT_BUDGET_S  # --ab-budget (a compile-time check gets COMPILE_BUDGET_FACTOR times it)
    # per pair in `batches`: the share of the pinned CPUs other processes used while it measured (None: unknown)
    busy: list[float | None] = field(default_factory=list)

    @property
    def counts_warm(self) -> bool:
        """Whether the budget counts each pair's warm-up round. Not for compile time: its warm-up is what a new
        process pays once for its first compile (7-23 s a process on the quiet 2-core machine, 27-270 s on a busy
        one before each side kept its Inductor cache across pairs, where later cold compiles took 0.1-30 s), which
        would leave the budget no room for rounds; it is reported apart."""
        return not ab_of(self.spec.aspect).cold_compiles

    @property
    def seconds(self) -> float:
        return sum(b.seconds + (b.warm_seconds if self.counts_warm else 0.0) for b in self.batches)

    @property
    def floor(self) -> float:
        return 0.0 if self.spec.aspect in TIMED else MEMORY_FLOOR_BYTES

    @property
    def budget(self) -> float:
        """Measuring seconds this check may spend: --ab-budget (memory); a compile-time check's from its own rounds'
        cost (see COMPILE_BUDGET_ROUNDS), between COMPILE_BUDGET_FACTOR and COMPILE_BUDGET_MOST times --ab-budget; a
        latency check's at least what its rounds and warm-ups cost (see LATENCY_BUDGET_ROUNDS), at most
        LATENCY_BUDGET_MOST times --ab-budget."""
        rounds = sum(len(b.baseline) for b in self.batches)
        per_round = sum(b.seconds for b in self.batches) / rounds if rounds else 0.0
        if ab_of(self.spec.aspect).cold_compiles:
            return min(self.budget_s * COMPILE_BUDGET_MOST,
                       max(self.budget_s * COMPILE_BUDGET_FACTOR, COMPILE_BUDGET_ROUNDS * per_round))
        if self.spec.aspect not in LATENCY_LIKE or not self.batches:
            return self.budget_s
        # the pairs measured so far say what a warm-up costs (the first one's, 5 calls a side to 2, errs on the large side)
        warm = sum(b.warm_seconds for b in self.batches) / len(self.batches)
        needed = LATENCY_BUDGET_ROUNDS * per_round + ab.MIN_PAIRS * warm
        return min(self.budget_s * LATENCY_BUDGET_MOST, max(self.budget_s, needed))

    def pair_cap(self) -> float:
        """Seconds the next pair may take: what is left, shared by the pairs a failure still needs."""
        still = max(1, ab.MIN_PAIRS - len(self.batches))
        return max(0.0, self.budget - self.seconds) / still

    def pair_is_full(self, r: int, seconds: float, warm_seconds: float, cap_s: float) -> bool:
        """Whether the pair being measured stops before its round `r` (0-based, timed rounds only): at a whole ABBA
        cycle, past its fewest rounds, once another round would take it past `cap_s`."""
        fewest = FEWEST_ROUNDS if self.batches else FIRST_FEWEST_ROUNDS
        counted = warm_seconds if self.counts_warm else 0.0
        return r >= fewest and r % 2 == 0 and counted + seconds * (r + 1) / r > cap_s

    def plan(self) -> int:
        """Rounds for the next pair (0: none fits in the budget left)."""
        figure = ab_of(self.spec.aspect)
        exact = all(b.exact for b in (*self.batches, *self.host_batches))  # host RAM noisy: more rounds too
        least = figure.noisy_least_rounds if figure.noisy_least_rounds and not exact else (
            figure.least_rounds or ab.CONFIRM_LEAST)
        wanted = ab.rounds_for(self.batches, self.threshold, self.floor, least=least, most=MAX_ROUNDS)
        rounds = sum(len(b.baseline) for b in self.batches)
        per_round = sum(b.seconds for b in self.batches) / max(1, rounds)
        warm = sum(b.warm_seconds for b in self.batches) / max(1, len(self.batches)) if self.counts_warm else 0.0
        fits = math.floor((self.pair_cap() - warm) / per_round) if per_round > 0 else wanted
        fits -= fits % 2
        return min(wanted, fits) if fits >= FEWEST_ROUNDS else 0

    @property
    def busy_shares(self) -> list[float | None]:
        """The pairs' busy shares the decision reads: a busy host slows what is timed; peak memory is counted, not
        timed, so its pairs stand whatever the host did."""
        return self.busy if self.spec.aspect in TIMED else []

    @property
    def open(self) -> bool:
        pending = [d is None or d.state == ABState.PENDING for d in (self.decision, self.host_decision)]
        return self.failed is None and (pending[0] or (bool(self.host_batches) and pending[1]))


def measure(
    specs: Sequence[CheckSpec],
    pair: Pair,
    thresholds: dict[str, float],
    *,
    timeout_s: float,
    budget_s: float = DEFAULT_BUDGET_S,
    say: Callable[[str], None],
    on_track: Callable[[Track], None],
    launched: tuple[LiveWorker, LiveWorker] | None = None,
    timeout_of: Callable[[CheckSpec], float] | None = None,
) -> None:
    """Measure every spec A/B until settled or out of budget; `on_track` gets each check once it is decided.

    `launched`: the first batch's pair, started ahead (while the correctness checks finished); closed here.
    `timeout_of`: each request's timeout by check (sized from its workload: orchestrate.budget), else `timeout_s`."""
    tracks = [Track(s, thresholds[s.aspect], budget_s=budget_s) for s in specs]
    alpha = ab.run_alpha(len(tracks))  # the run's false-alarm budget, shared (Bonferroni); ab divides by its looks
    for batch in range(1, MAX_BATCHES + 1):
        todo = [t for t in tracks if t.open]
        if not todo:
            if launched:
                close(*launched)
            return
        say(f"A/B batch {batch}: {len(todo)} check{'s' if len(todo) != 1 else ''} in a fresh pair of workers")
        # the orchestrator off the pinned CPUs while it measures: its polling is neither others' load nor the workers'
        with pair.start(batch, {t.spec.aspect for t in todo}, launched) as (b, c), hostload.aside(pair.cpus) as away:
            launched = None
            for t in todo:
                measure_batch(t, b, c, timeout_of(t.spec) if timeout_of else timeout_s, cap_s=t.pair_cap(), away=away)
                if t.failed is not None:
                    on_track(t)
                    continue
                t.next_rounds = t.plan()
                last = batch == MAX_BATCHES or not t.next_rounds
                t.decision = hostbusy.decide(t.batches, t.busy_shares, t.threshold, alpha=alpha, final=last,
                                             floor=t.floor, increase="slowdown" if t.spec.aspect in TIMED else "growth")
                if t.host_batches:
                    t.host_decision = ab.decide(t.host_batches, t.threshold, alpha=alpha, final=last,
                                                floor=HOST_FLOOR_BYTES, increase="growth")
                if not t.open:
                    on_track(t)


def first_rounds(aspect: str) -> int:
    return ab_of(aspect).first_rounds


def measure_batch(t: Track, baseline: LiveWorker, candidate: LiveWorker, timeout_s: float,
                  cap_s: float = math.inf, away: bool = False) -> None:
    """Warm-up, then ABBA rounds (t.next_rounds, or the aspect's first-pair count), stopping at a whole ABBA
    cycle once another round would take the pair past `cap_s`; a failure on either side ends the check
    with both sides' observations. The timed rounds' share of the pinned CPUs that other processes used is kept
    in t.busy (`away`: the orchestrator's own threads were kept off those CPUs)."""
    latency, timed = t.spec.aspect in LATENCY_LIKE, t.spec.aspect in TIMED
    rounds = t.next_rounds or first_rounds(t.spec.aspect)
    values: dict[str, list[float]] = {"b": [], "c": []}
    raw: dict[str, list[list[float]]] = {"b": [], "c": []}
    seconds = warm_seconds = 0.0
    host: dict[str, list[float]] = {"b": [], "c": []}
    meter = hostload.Meter(baseline.cpus, lambda: [w.proc.pid for w in (baseline, candidate) if w.proc], away=away)
    for r in range(-WARMUP_ROUNDS, rounds):
        if t.pair_is_full(r, seconds, warm_seconds, cap_s):
            break
        if r == 0:  # both workers answered the warm-up: pinned, torch imported, pools started
            meter.start()
        order = (("b", baseline), ("c", candidate)) if r % 2 == 0 else (("c", candidate), ("b", baseline))
        warm = r < 0
        # the warm-up round warms (3 calls before the single call that calibrates `inner`: a new process's first
        # calls are slow, and a calibration on them gives too few loops; 1 once `inner` is known); a timed round
        # calls the workload only for its sample: the rounds before it warmed this process
        warmup = (1 if t.inner else 3) if warm else 0
        params = {"samples": 1 if warm else LATENCY_SAMPLES, "warmup": warmup, "inner": t.inner,
                  "min_sample_s": MIN_SAMPLE_S} if latency else {"samples": 1} if timed else {}
        if warm and not latency and timed:  # a compile-time pair warms its processes on a tiny compile
            params["warm_up"] = "tiny"
        once: list[float] = []
        for side, worker in order:
            obs = worker.request(replace(t.spec, params={**t.spec.params, **params}), timeout_s)
            compiled = float(obs.metrics.get("compiled_s") or 0.0)  # compiled latency: a worker's compile, apart
            t.compile_seconds += compiled
            if warm:
                warm_seconds += obs.duration_s - compiled
            else:
                seconds += obs.duration_s - compiled
            if obs.status != Status.OK:
                other = Observation(t.spec.id, Status.SKIPPED, message="the other side failed first")
                failed = Observation(t.spec.id, obs.status, message=obs.message, traceback=obs.traceback,
                                     duration_s=obs.duration_s)
                t.failed = (failed, other) if side == "b" else (other, failed)
                return
            t.metrics[side] = obs.metrics
            once.append(float(obs.metrics.get("once_ms") or 0.0))
            if warm:
                continue
            sample = [float(x) for x in obs.metrics.get("samples_ms", [])] if timed \
                else [float(obs.metrics.get("peak_bytes", 0))]
            raw[side].append(sample)
            values[side].append(stats.median(sample))
            if "host_peak_bytes" in obs.metrics:
                host[side].append(float(round(obs.metrics["host_peak_bytes"] / HOST_QUANTUM_BYTES) * HOST_QUANTUM_BYTES))
        if warm and latency and not t.inner:
            fastest = min((x for x in once if x > 0), default=1.0)  # ms for one call
            t.inner = max(1, math.ceil(MIN_SAMPLE_S * 1000.0 / fastest))
    exact = all(len({x for s in raw[side] for x in s}) == 1 for side in ("b", "c"))
    t.batches.append(ab.Batch(tuple(values["b"]), tuple(values["c"]), exact=exact, seconds=seconds,
                              warm_seconds=warm_seconds))
    t.busy.append(meter.stop())
    for side in ("b", "c"):
        t.samples[side] += [x for s in raw[side] for x in s]
    if host["b"] and len(host["b"]) == len(host["c"]):
        t.host_batches.append(ab.Batch(tuple(host["b"]), tuple(host["c"]),
                                       exact=all(len(set(host[side])) == 1 for side in ("b", "c")), seconds=0.0))
        for side in ("b", "c"):
            t.host_samples[side] += host[side]
