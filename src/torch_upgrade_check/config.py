"""What torch-upgrade-check.yml holds: the frozen Config, its keys and defaults (config_yaml.py reads one; no torch)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch_upgrade_check import suite
from torch_upgrade_check.aspects import ASPECT, WORKLOAD_ASPECTS
from torch_upgrade_check.model import COMPILE_OPTIONS

DEFAULT_PATH = Path("torch-upgrade-check.yml")
SCHEMA_VERSION = 1
CROSS_VERSION = "cross-version"  # only `compare` runs it: baseline's outputs vs candidate's
# WORKLOAD_ASPECTS, what a workload may list, is derived from aspects.TABLE (fsdp2 and ddp are left out: they train
# the built-in transformer_block under torchrun and never call a factory)
# opt-in, as aspects.TABLE says: compile-time (--compile-time, or listed here), each sample is a whole cold compile;
# so are compile-cache (a cold compile and a second process's warm one) and compiled-latency (a compile in every A/B
# worker), for a team that ships its model compiled; and the artifact aspects (export, jit, aoti, onnx): a team lists
# the artifacts it ships (`jit:` or `onnx:` alone also plans it)
OPT_IN_ASPECTS = tuple(a for a in WORKLOAD_ASPECTS if ASPECT[a].opt_in)
DEFAULT_ASPECTS = tuple(a for a in WORKLOAD_ASPECTS if a not in OPT_IN_ASPECTS)
DEFAULT_DTYPES = ("float32",)

TOP_KEYS = ("version", "suite", "python-path", "thresholds", "workloads", "pytest", "requirements", "extras",
            "threads", "ab-budget", "undecided", "fail-on-shared-failures", "fleet", "artifacts", "check-timeout-seconds")
THRESHOLD_KEYS = ("rtol", "atol", "max-latency-regression", "max-memory-regression", "max-compile-time-regression")
WORKLOAD_KEYS = ("name", "factory", "aspects", "dtypes", "rtol", "atol", "max-latency-ms", "allow-graph-breaks",
                 "training-steps", "jit", "onnx", "compile")
COMPILE_KEYS = ("mode", "dynamic", "fullgraph", "backend", "options")  # torch.compile's own keyword arguments
JIT_MODES = ("script", "trace")
ONNX_EXPORTERS = ("dynamo", "legacy", "default")
ARTIFACT_KEYS = ("name", "file", "kind", "factory", "inputs")
# what the candidate loads a shipped file with (its default arguments); by suffix unless `kind:` says
ARTIFACT_KINDS = {"checkpoint": "torch.load", "export": "torch.export.load", "aoti": "torch._inductor.aoti_load_package",
                  "jit": "torch.jit.load", "onnx": "onnxruntime.InferenceSession"}
ARTIFACT_ASPECT = "artifact"  # the check of a shipped file: NAME[-]/artifact
PYTEST_KEYS = ("args",)
FLEET_KEYS = ("archs", "driver", "memory")


@dataclass(frozen=True)
class Thresholds:
    """Defaults for every check; CLI flags override them. Regressions are ratios: 0.10 means 10% worse."""

    rtol: float | None = None
    atol: float | None = None
    max_latency_regression: float | None = None
    max_memory_regression: float | None = None
    max_compile_time_regression: float | None = None


@dataclass(frozen=True)
class CompileOptions:
    """A workload's `compile:`: torch.compile's arguments as the team's code passes them. None (and ""): not given,
    torch.compile's default; `options` is Inductor's config (torch.compile(options=...)), as (key, value) pairs."""

    mode: str = ""
    dynamic: bool | None = None
    fullgraph: bool | None = None
    backend: str = ""
    options: tuple[tuple[str, Any], ...] = ()

    def params(self) -> dict[str, Any]:
        """What the worker reads (spec.params[model.COMPILE_OPTIONS]): the keys given, JSON-ready."""
        given = {"mode": self.mode, "dynamic": self.dynamic, "fullgraph": self.fullgraph, "backend": self.backend,
                 "options": dict(self.options)}
        return {k: v for k, v in given.items() if v not in (None, "", {})}


@dataclass(frozen=True)
class UserWorkload:
    """One entry of `workloads:`. `max_latency_ms` maps device -> ms; `line` is where it starts in the file."""

    name: str
    factory: str
    aspects: tuple[str, ...] = DEFAULT_ASPECTS
    dtypes: tuple[str, ...] = DEFAULT_DTYPES
    rtol: float | None = None
    atol: float | None = None
    max_latency_ms: dict[str, float] = field(default_factory=dict)
    allow_graph_breaks: bool = False  # compare: a graph break or recompile new in the candidate does not fail compile
    training_steps: int | None = None  # training-curve's steps (default: worker.curve.DEFAULT_STEPS)
    jit: str = ""  # "script" or "trace": how the jit aspect builds its TorchScript program (declared: jit is planned)
    onnx: str = ""  # "dynamo", "legacy" or "default": the exporter torch.onnx.export is called with (declared: planned)
    compile: CompileOptions = CompileOptions()  # how its compile check (and compiled uses) call torch.compile
    line: int = 0


@dataclass(frozen=True)
class ShippedArtifact:
    """One entry of `artifacts:`: a file the team ships, loaded by the torch under test with its default arguments.
    `file` is relative to the config's folder; `factory` builds the model a checkpoint's state_dict goes into (and its
    inputs), `inputs` returns the inputs a program runs on."""

    name: str
    file: str
    kind: str
    factory: str = ""
    inputs: str = ""
    line: int = 0


@dataclass(frozen=True)
class PytestConfig:
    """The user's pytest selection, run with the torch under test (empty args: pytest's own defaults)."""

    args: tuple[str, ...] = ()


@dataclass(frozen=True)
class FleetConfig:
    """The GPUs the team runs: their architectures (sm_80, ...) and the oldest NVIDIA driver among them."""

    archs: tuple[str, ...] = ()
    driver: str = ""
    memory: int = 0  # bytes of the smallest card (0: not given): each workload's peak must fit, on a CUDA runner


@dataclass(frozen=True)
class Config:
    """A loaded config. Relative paths (python-path, pytest args) are relative to the file's folder."""

    path: Path
    suite: tuple[str, ...] = suite.BUILTIN_NAMES
    python_path: tuple[str, ...] = ()
    thresholds: Thresholds = Thresholds()
    workloads: tuple[UserWorkload, ...] = ()
    pytest: PytestConfig | None = None
    requirements: tuple[str, ...] = ()  # the team's stack (stack.py), relative to the config's folder
    extras: tuple[str, ...] = ()  # pyproject.toml groups of the stack
    fleet: FleetConfig | None = None
    artifacts: tuple[ShippedArtifact, ...] = ()  # files the team ships: each is a check NAME[-]/artifact
    version: int = SCHEMA_VERSION
    threads: int | None = None  # torch CPU threads of every worker (--threads overrides)
    ab_budget: float | None = None  # compare's measuring seconds per A/B check (--ab-budget overrides)
    undecided: str | None = None  # fail | pass: an undecided A/B check beyond its threshold (--undecided overrides)
    # compare: a correctness failure the baseline shares at the same size fails too (--[no-]fail-on-shared-failures)
    fail_on_shared_failures: bool | None = None
    check_timeout_seconds: float | None = None  # every check's timeout (--timeout overrides); None: sized by budget

    @property
    def root(self) -> Path:
        return self.path.resolve().parent

    def resolved_python_path(self) -> list[str]:
        return [str((self.root / p).resolve()) for p in self.python_path]

    def workloads_for_suite(self, *, cross_version: bool = False) -> list[suite.Workload]:
        """The built-ins `suite:` selects (in suite order), then the user's workloads.

        `cross-version` stays in the user's aspects only when `cross_version` is True (compare);
        a single-version run must not plan it. Built-ins keep their aspects from suite.BUILTIN.
        """
        chosen = [w for w in suite.BUILTIN if w.name in self.suite]
        users = [suite.Workload(w.name, w.dtypes, w.aspects, f"{w.factory} ({self.path.name}:{w.line})", w.factory)
                 for w in self.workloads]
        shipped = [suite.Workload(a.name, ("-",), (ARTIFACT_ASPECT,), f"{a.kind} file {a.file} ({self.path.name}:{a.line})",
                                  a.factory) for a in self.artifacts]
        return chosen + (users if cross_version else drop_cross_version(users)) + shipped

    def workload(self, name: str) -> UserWorkload | None:
        return next((w for w in self.workloads if w.name == name), None)

    def tolerances_for(self, workload: str, *, rtol: float | None = None, atol: float | None = None) -> dict[str, float]:
        """rtol/atol for one workload's checks: the given (CLI) value, else the workload's, else `thresholds:`.

        A key left out means the worker's default for the dtype (torch.testing's) applies.
        """
        w = self.workload(workload)
        chosen = {"rtol": _first(rtol, w.rtol if w else None, self.thresholds.rtol),  # 0 is a value, not "unset"
                  "atol": _first(atol, w.atol if w else None, self.thresholds.atol)}
        return {k: v for k, v in chosen.items() if v is not None}

    def options_for(self, workload: str) -> dict[str, Any]:
        """The workload's other keys its checks read (spec.params): allow_graph_breaks, steps."""
        w = self.workload(workload)
        a = next((a for a in self.artifacts if a.name == workload), None)
        if a is not None:
            return {"file": str((self.root / a.file).resolve()), "kind": a.kind, "inputs": a.inputs}
        if w is None:
            return {}
        return {**({"allow_graph_breaks": True} if w.allow_graph_breaks else {}),
                **({"steps": w.training_steps} if w.training_steps else {}),
                **({"jit": w.jit} if w.jit else {}), **({"onnx": w.onnx} if w.onnx else {}),
                **({COMPILE_OPTIONS: w.compile.params()} if w.compile.params() else {})}

    def latency_limits(self, device: str) -> dict[str, float]:
        """workload name -> max median latency in ms on `device`, for analysis.verdicts.decide(max_latency_ms=...).

        CLI `--max-latency-ms NAME=MS` entries override these: `{**config.latency_limits(d), **cli}`.
        """
        return {w.name: w.max_latency_ms[device] for w in self.workloads if device in w.max_latency_ms}


def drop_cross_version(workloads: Iterable[suite.Workload]) -> list[suite.Workload]:
    """The workloads without the `cross-version` aspect (for `run`); those left with no aspect are dropped."""
    kept = []
    for w in workloads:
        aspects = tuple(a for a in w.aspects if a != CROSS_VERSION)
        if aspects:
            kept.append(suite.Workload(w.name, w.dtypes, aspects, w.description, w.factory))
    return kept


def _first(*values: float | None) -> float | None:
    return next((v for v in values if v is not None), None)
