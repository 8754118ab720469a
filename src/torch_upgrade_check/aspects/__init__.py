"""Every aspect in one table: where its checks run, how compare treats them, what --fail-on calls their failures,
what plans them when the default does not, what a check costs, and the folder that holds its code (stdlib only).

The vocabularies the other modules use (model.ASPECTS, FAIL_KINDS, compare's per-side and A/B aspects, the A/B
words and units) are derived here from TABLE; the order of TABLE is the order reports list aspects in.

An aspect's folder, `aspects/<folder>/`, holds `run.py` (the worker side: imports torch), `judge.py` (pure: its
typed `Metrics` in, outcome and reason out) and `render.py` (its summary columns), and an aspect whose checks run
on the host (Runs.HOST) `host.py` in place of run.py; `part` imports one of them by
name, so the generic layers (the worker loop, verdicts, the summary) never name an aspect, and this table, which
model and the orchestrator import, never imports torch.
"""

from __future__ import annotations

import enum
import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import NamedTuple


class Word(str, enum.Enum):
    """A str-valued enum that is its word wherever it goes: JSON, f-strings, reprs inside a dict, comparisons and hashes
    with plain strings (a report read back has plain strings; one written has the same bytes)."""

    def __str__(self) -> str:
        return str.__str__(self)

    def __repr__(self) -> str:
        return repr(str.__str__(self))


class Runs(Word):
    """Where a check of the aspect runs."""

    WORKER = "worker"  # a worker process of the side under test (compare's A/B: a fresh baseline/candidate pair of them)
    TORCHRUN = "torchrun"  # the worker starts torchrun, and the check's ranks run in its processes
    HOST = "host"  # the orchestrator, on the host, beside the workers (its folder's host.py): never in a worker
    REPORT = "report"  # decided from a finished report's results (report, merge, the end of run and compare)


class Stage(Word):
    """When a host check (Runs.HOST) runs in compare: commands/stack_checks calls its host.py's `on_host` then."""

    BEFORE_INSTALL = "before-install"  # each side's stack resolved before anything is installed: its results may stop the run
    INSTALLED = "installed"  # in each side's installed environment, once its workers are ready


class InCompare(Word):
    """How compare treats the aspect's checks."""

    ALONE = "alone"  # each side runs it in its own workers and is judged on its own result
    SAVED = "saved"  # the baseline saves what the candidate loads and is judged against (planned per side)
    AB = "ab"  # measured A/B: both sides in the same fresh worker pairs, interleaved (orchestrate.measure)
    OPS = "ops"  # the baseline's recorded aten ops timed on both sides, in fresh pairs of its own (orchestrate.optiming)
    STACK = "stack"  # a check of the team's stack, on each side's environment (commands/stack_checks)
    REPORT = "report"  # decided from the candidate's report once its other checks are done


class FailKind(Word):
    """What `--fail-on` (and the action's fail-on) names a failing check of the aspect."""

    CORRECTNESS = "correctness"
    LATENCY = "latency"
    MEMORY = "memory"
    WARNINGS = "warnings"


class Threshold(Word):
    """The regression threshold that judges an A/B aspect; compare measures and shows them in this order."""

    LATENCY = "latency"  # --max-latency-regression
    MEMORY = "memory"  # --max-memory-regression
    COMPILE_TIME = "compile-time"  # --max-compile-time-regression


class Dtypes(Word):
    """Which of a workload's dtypes a check of the aspect is planned for."""

    EACH = "each"
    FLOAT32 = "float32"  # the float32 model under autocast: float32 only
    FIRST = "first"  # the workload's data, whatever the model's dtype: its first dtype only


class Cost(NamedTuple):
    """Seconds a check took on the development machine (costs.MEASURED_ON): median, the most, and a note (None: not
    measured here, and the note says why)."""

    median_s: float | None
    most_s: float | None
    note: str = ""


@dataclass(frozen=True)
class AB:
    """An A/B aspect's figure: its unit ("ms" or "bytes"), what a reason calls it, and its threshold; and how
    orchestrate.measure sizes its pairs: ABBA rounds a side in its first pair, the fewest in a confirmation pair (0:
    analysis.ab.CONFIRM_LEAST, the statistics' own), and the fewest once a series was not exact (0: as least)."""

    unit: str
    words: str
    threshold: Threshold
    first_rounds: int
    least_rounds: int = 0
    noisy_least_rounds: int = 0
    # a sample is a whole cold compile: the check's budget is sized from what its rounds cost, and its pairs' warm-up
    # rounds (a new process's first compile) are reported apart, never counted in it
    cold_compiles: bool = False
    # on the CPU its pairs' workers ready the CPU profiler, which peak memory reads there, before they are pinned
    # (worker.__main__: two workers pinned to one CPU would pay its start in turn); the pair's `warm` names the aspect
    cpu_profiler: bool = False


@dataclass(frozen=True)
class Aspect:
    """One aspect. `opt_in` says what plans it where the default does not ("": planned wherever a workload has it).
    `family` groups aspects judged by one set of rules: "compile", torch.compile against eager (`compile` as the
    workload's `compile:` options say, `compile-mode` in the mode teams ship for speed: model.COMPILE_MODE_OF);
    "training", a model trained (parameters and a loss); "artifact", a deployment artifact built, saved and loaded in a
    fresh process (onnx: run in onnxruntime; artifact: a file the team ships, loaded with default arguments), in
    compare the baseline's loaded by the candidate."""

    name: str
    runs: Runs
    compare: InCompare
    kind: FailKind
    cost: Cost | None  # None only for an aspect decided from a report (Runs.REPORT)
    opt_in: str = ""
    compare_only: bool = False  # `run` never plans it: it needs a baseline
    family: str = ""
    dtypes: Dtypes = Dtypes.EACH
    last: bool = False  # planned after a workload's other checks: it reports what they raised
    ab: AB | None = None
    # judged tensor by tensor against a golden, so a failure has a size: compare excuses one the baseline shares at
    # the same size as the model's own (analysis.shared has the rule)
    sized: bool = False
    # What a check costs, for its timeout (orchestrate.budget): `forwards`, in the workload's warm eager forwards as
    # the worker timed it on its side; `compiles`, in compiles of the workload's forward and training step, each
    # costing budget.COMPILE_S a compile plus budget.OP_S an aten op of its forward. Both 0: not sized (a host check,
    # a file, a DataLoader's batches): the default timeout holds. Rough figures, erring high: see docs/checks.md.
    forwards: float = 0.0
    compiles: float = 0.0
    # the package under aspects/ that holds its run.py, judge.py and render.py (Python's spelling of the name; the
    # aspects of one family may share one; tests/aspects/test_folders.py holds every row to having one)
    folder: str = ""
    # False: its check loads a file the team ships, not the workload's model (the file has its own dtypes, and maybe
    # no factory): the worker neither asks the device for the check's dtype nor builds an instance; its run.py's
    # run(spec, device) loads the file itself
    builds_workload: bool = True
    # False: a team's workload may not list it in `aspects:` (WORKLOAD_ASPECTS): the config plans it otherwise (it runs
    # the built-in workloads' own code, never a team's factory; or, artifact, the config's `artifacts:`)
    listed: bool = True
    against_cpu: bool = False  # compares an accelerator with the CPU: on the CPU it is skipped, saying so (cross-backend)
    # compiled in the mode teams ship for speed on the device (model.COMPILE_MODE_OF) in place of the workload's mode
    # and Inductor options (worker.compiling.options; compile-mode, which shares compile's folder)
    device_mode: bool = False
    # the settings' switch (a dest: compile_time for --compile-time) that adds it to every workload that can take it;
    # bisect hands it on to every step (commands.argv.FORWARD_FLAGS)
    switch: str = ""
    stage: Stage | None = None  # a host check's (Runs.HOST): when compare runs it; None for every other row


_W, _C, _FK = Runs.WORKER, InCompare, FailKind  # short, for the table
STACK_OPT_IN = "a stack (--requirements, --extras, a lock file, or the config's), or --only naming it"
TABLE: tuple[Aspect, ...] = (
    Aspect("numerics", _W, _C.ALONE, _FK.CORRECTNESS, Cost(0.8, 3.6), sized=True, forwards=50, folder="numerics"),
    Aspect("cross-backend", _W, _C.ALONE, _FK.CORRECTNESS,
           Cost(None, None, "needs an accelerator: not measured here (skipped on a CPU)"), sized=True, forwards=50,
           folder="cross_backend", against_cpu=True),
    Aspect("cross-version", _W, _C.SAVED, _FK.CORRECTNESS, Cost(0.2, 14, "compare only; the first of a worker the most"),
           compare_only=True, forwards=50, folder="cross_version"),
    Aspect("compile", _W, _C.SAVED, _FK.CORRECTNESS,
           Cost(7.3, 28, "Inductor compiles of the forward and the training step; FlexAttention's take the most"),
           family="compile", forwards=50, compiles=1, folder="compile"),
    Aspect("compile-mode", _W, _C.SAVED, _FK.CORRECTNESS,
           Cost(0.1, 1.2, "mlp and matmul compiled again in the device's mode, after their compile check (measured "
                          "alone, 2026-12-04, Inductor's cache empty)"), family="compile", forwards=50, compiles=1,
           folder="compile", listed=False, device_mode=True),
    Aspect("determinism", _W, _C.ALONE, _FK.CORRECTNESS, Cost(0.2, 0.3), forwards=20, folder="determinism"),
    Aspect("deterministic-backward", _W, _C.ALONE, _FK.CORRECTNESS, Cost(None, None, "CUDA only: not measured here"),
           forwards=20, folder="deterministic_backward", listed=False),
    Aspect("latency", _W, _C.AB, _FK.LATENCY, Cost(2.1, 6.0), ab=AB("ms", "latency", Threshold.LATENCY, 24), forwards=100,
           folder="latency"),
    Aspect("op-latency", _W, _C.OPS, _FK.LATENCY,
           Cost(0.9, 10, "compare only: the recorded ops timed on both sides, in 2 fresh process pairs the checks "
                         "share; the one that records first the most"), compare_only=True, forwards=200,
           folder="op_latency"),
    Aspect("memory", _W, _C.AB, _FK.MEMORY, Cost(0.3, 0.8),  # peak memory is usually exact: identical rounds
           ab=AB("bytes", "peak memory", Threshold.MEMORY, 3, least_rounds=3, noisy_least_rounds=8, cpu_profiler=True),
           forwards=10, folder="memory"),
    Aspect("fsdp2", Runs.TORCHRUN, _C.SAVED, _FK.CORRECTNESS, Cost(46, 46, "torchrun and 2 processes (gloo)"), forwards=200,
           folder="fsdp2"),
    Aspect("ddp", Runs.TORCHRUN, _C.SAVED, _FK.CORRECTNESS,
           Cost(12, 12, "opt-in (--ddp): torchrun and 2 processes (gloo), 25 s of CPU"), opt_in="--ddp", forwards=200,
           folder="ddp", switch="ddp"),
    Aspect("checkpoint", _W, _C.SAVED, _FK.CORRECTNESS, Cost(0.7, 0.7), family="training", forwards=50,
           folder="checkpoint"),
    Aspect("training-curve", _W, _C.SAVED, _FK.CORRECTNESS, Cost(15, 21, "50 steps, twice"), family="training", forwards=400,
           folder="training_curve"),
    Aspect("sdpa-backends", _W, _C.ALONE, _FK.CORRECTNESS, Cost(3.0, 3.5), sized=True, forwards=50,
           folder="sdpa_backends", listed=False),
    Aspect("amp", _W, _C.SAVED, _FK.CORRECTNESS, Cost(2.2, 4.1), family="training", dtypes=Dtypes.FLOAT32,
           sized=True, forwards=100, folder="amp"),
    Aspect("dataloader", _W, _C.SAVED, _FK.CORRECTNESS,
           Cost(10, 24, "6 DataLoaders of 2 workers: fork, spawn, forkserver, persistent workers off and on "
                        "(spawned workers import torch)"), dtypes=Dtypes.FIRST, folder="dataloader"),
    Aspect("compile-time", _W, _C.AB, _FK.LATENCY, Cost(62, 62, "3 cold compiles of a small MLP, and a warm-up"),
           opt_in="--compile-time, or a workload's aspects",
           ab=AB("ms", "cold compile time", Threshold.COMPILE_TIME, 6, least_rounds=2, cold_compiles=True),
           forwards=10, compiles=2, folder="compile_time", switch="compile_time"),
    Aspect("compile-cache", _W, _C.ALONE, _FK.CORRECTNESS,
           Cost(5.5, 27, "a cold compile and a second process's warm one: matmul's 5 s, a small MLP's C++ "
                         "kernels 12-27 s (2026-12-04, other jobs running)"),
           opt_in="a workload's aspects (the built-in matmul has it)", forwards=10, compiles=1.5, folder="compile_cache"),
    Aspect("compiled-latency", _W, _C.AB, _FK.LATENCY,
           Cost(2.0, 5.4, "one compile a worker (not timed), then as latency (2026-12-04, other jobs running)"),
           opt_in="a workload's aspects (the built-in mlp has it)",
           ab=AB("ms", "compiled latency", Threshold.LATENCY, 24), forwards=100, compiles=0.5,
           folder="compiled_latency"),
    Aspect("warnings", _W, _C.ALONE, _FK.WARNINGS, Cost(0.3, 0.5), last=True, forwards=10, folder="warnings"),
    Aspect("resolve", Runs.HOST, _C.STACK, _FK.CORRECTNESS,
           Cost(None, None, "your stack: one installer dry run a side (1.5 s with pip here, see Cost of a run)"),
           opt_in=STACK_OPT_IN, folder="resolve", stage=Stage.BEFORE_INSTALL),
    Aspect("imports", Runs.HOST, _C.STACK, _FK.CORRECTNESS,
           Cost(None, None, "your stack: one process a top-level module"), opt_in=STACK_OPT_IN, folder="imports",
           stage=Stage.INSTALLED),
    Aspect("abi", Runs.HOST, _C.STACK, _FK.CORRECTNESS,
           Cost(None, None, "your stack: reads every shared object that links torch"), opt_in=STACK_OPT_IN,
           folder="abi", stage=Stage.INSTALLED),
    Aspect("api", Runs.HOST, _C.STACK, _FK.CORRECTNESS,
           Cost(5.4, 13, "opt-in (--scan): one process a side imports torch and reaches each name your code uses; "
                         "names under torch._dynamo the most"), opt_in="--scan, or --only api", folder="api",
           stage=Stage.INSTALLED),
    Aspect("export", _W, _C.SAVED, _FK.CORRECTNESS,
           Cost(7.4, 13, "the first of a worker imports torch.export in it and in the loader process"),
           opt_in="a workload's aspects (the built-ins have it)", family="artifact", forwards=20, compiles=0.3,
           folder="export"),
    Aspect("jit", _W, _C.SAVED, _FK.CORRECTNESS, Cost(1.4, 1.4), opt_in="a workload's aspects or its jit: (the built-in "
                                                                      "mlp has it)", family="artifact", forwards=500,
           folder="export"),
    Aspect("aoti", _W, _C.SAVED, _FK.CORRECTNESS, Cost(37, 37, "one AOTInductor compile of a small MLP"),
           opt_in="a workload's aspects", family="artifact", forwards=50, compiles=1, folder="export"),
    Aspect("onnx", _W, _C.SAVED, _FK.CORRECTNESS,
           Cost(9.4, 9.4, "dynamo=True, the first of a worker (imports of the exporter); the legacy exporter 0.1 s"),
           opt_in="a workload's aspects or its onnx:", family="artifact", forwards=20, compiles=0.3, folder="onnx"),
    Aspect("artifact", _W, _C.SAVED, _FK.CORRECTNESS, Cost(0.1, 0.2, "a checkpoint or a .pt2 program already imported"),
           opt_in="the config's artifacts:", family="artifact", folder="artifact", builds_workload=False, listed=False),
    Aspect("fleet-memory", Runs.REPORT, _C.REPORT, _FK.MEMORY, None, opt_in="--fleet (or the config's fleet:) with a "
                                                                            "memory", folder="fleet_memory"),
)
ASPECT = {a.name: a for a in TABLE}

# what a run plans and reports list, in this order (the aspects decided from a report are named in FAIL_KINDS only)
ASPECTS = tuple(a.name for a in TABLE if a.runs is not Runs.REPORT)
FAIL_ON = tuple(k.value for k in FailKind)
FAIL_KINDS = {a.name: a.kind.value for a in TABLE if a.kind is not FailKind.CORRECTNESS}
STACK_ASPECTS = tuple(a.name for a in TABLE if a.compare is InCompare.STACK)
TRAINING_ASPECTS = tuple(a.name for a in TABLE if a.family == "training")
SAVED_ASPECTS = tuple(a.name for a in TABLE if a.compare is InCompare.SAVED)
PER_SIDE_ASPECTS = tuple(a for a in SAVED_ASPECTS if not ASPECT[a].compare_only)  # cross-version is planned apart
APART_ASPECTS = tuple(a for a in SAVED_ASPECTS if ASPECT[a].compare_only)  # the candidate's only: cross-version
LAST = tuple(a.name for a in TABLE if a.last)
FLOAT32_ONLY = tuple(a.name for a in TABLE if a.dtypes is Dtypes.FLOAT32)
FIRST_DTYPE_ONLY = tuple(a.name for a in TABLE if a.dtypes is Dtypes.FIRST)
SIZED_ASPECTS = tuple(a.name for a in TABLE if a.sized)  # a failure the baseline shares at the same size is excused
# an aspect folder's modules: the worker side, the rule, the summary's columns, and (a Runs.HOST aspect's, in place of
# run.py) the host side, which the orchestrator's commands call beside the workers
ROLES = ("run", "judge", "render", "host")
# the host checks compare runs at each stage (Stage's order, then TABLE's), each reached by its row's folder's host.py
HOST_STAGES = {stage: tuple(a.name for a in TABLE if a.stage is stage) for stage in Stage}


def part(aspect: str, role: str) -> ModuleType | None:
    """The module `role` of `aspect`'s folder, imported now (the worker's run.py imports torch: only the worker asks
    for it); None for a name the table does not hold (an aspect of another version's report)."""
    if role not in ROLES:
        raise ValueError(f"an aspect's folder holds {', '.join(ROLES)}, not {role!r}")
    folder = ASPECT[aspect].folder if aspect in ASPECT else ""
    return importlib.import_module(f"{__name__}.{folder}.{role}") if folder else None


def ab_of(aspect: str) -> AB:
    """An A/B aspect's figure (KeyError for an aspect that is not measured A/B)."""
    figure = ASPECT[aspect].ab
    if figure is None:
        raise KeyError(aspect)
    return figure


# measured A/B, grouped by the threshold that judges them (Threshold's order), as compare measures and shows them
AB_ASPECTS = tuple(sorted((a.name for a in TABLE if a.ab), key=lambda name: list(Threshold).index(ab_of(name).threshold)))
TIMED = tuple(a for a in AB_ASPECTS if ab_of(a).unit == "ms")  # samples are times: judged as slowdowns
LATENCY_LIKE = tuple(a for a in AB_ASPECTS if ab_of(a).threshold is Threshold.LATENCY)  # a forward, eager or compiled

# What a team's workload may list (the config's `aspects:`, the schema's enum): the aspects a worker runs on the
# workload's own model (not under torchrun: fsdp2 and ddp train the built-in transformer_block; not compare's op
# timing), less those the config plans otherwise (a row's `listed=False`). Listed as the
# messages and docs list them: the correctness checks planned by default, then the figures measured and the opt-ins,
# then the artifacts a team ships (each group in TABLE's order).
WORKLOAD_ASPECTS = tuple(a.name for a in sorted(
    (a for a in TABLE if a.runs is Runs.WORKER and a.compare is not InCompare.OPS and a.listed),
    key=lambda a: (a.family == "artifact", a.kind is not FailKind.CORRECTNESS or bool(a.opt_in))))
