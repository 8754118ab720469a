"""Plain data shared by orchestrator, worker and renderers: what was asked, seen and decided (stdlib only)."""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import Any

# the aspects' vocabulary, from aspects.TABLE; named here too for the front ends and scripts that import it from model
from torch_upgrade_check.aspects import ASPECTS as ASPECTS
from torch_upgrade_check.aspects import FAIL_KINDS as FAIL_KINDS
from torch_upgrade_check.aspects import FAIL_ON as FAIL_ON
from torch_upgrade_check.aspects import STACK_ASPECTS as STACK_ASPECTS
from torch_upgrade_check.aspects import Word

DEVICES = ("cpu", "cuda", "mps")
# tf32: float32 tensors computed with TF32 tensor-core math (CUDA, compute capability 8.0+); every other
# float32 check runs in IEEE float32.
DTYPES = ("float32", "float16", "bfloat16", "float64", "tf32")
# torch.compile's modes (torch._inductor.list_mode_options), as a workload's `compile: {mode: ...}` names them
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
# compile-mode's mode per device: CUDA graphs where there is CUDA, else autotuning without them
COMPILE_MODE_OF = {"cuda": "reduce-overhead", "cpu": "max-autotune-no-cudagraphs", "mps": "max-autotune-no-cudagraphs"}
COMPILE_OPTIONS = "compile"  # CheckSpec.params' key of a workload's `compile:` options (config writes, worker.compiling reads)
# the environment variables that change what torch.compile does: each run records the ones set (report environment)
COMPILE_ENV_PREFIXES = ("TORCH_COMPILE_", "TORCHINDUCTOR_", "TORCHDYNAMO_")


class Outcome(str, enum.Enum):
    """The outcome of one check. `not-run` marks a planned check that never started; `suspicious`
    a change beyond a threshold that statistics could not confirm (warns, does not fail)."""

    PASSED = "passed"
    SUSPICIOUS = "suspicious"
    FAILED = "failed"
    ERROR = "error"
    SKIPPED = "skipped"
    NOT_RUN = "not-run"


class Status(Word):
    """What a worker saw of one check (Observation.status): a result, a skip, or how it broke."""

    OK = "ok"  # metrics hold the measurement
    SKIPPED = "skipped"  # message says why
    EXCEPTION = "exception"  # the check raised: message and traceback
    CRASH = "crash"  # the worker died in it
    TIMEOUT = "timeout"  # the worker was killed at the check's timeout


class ABState(Word):
    """Where an A/B decision stands (analysis.ab.Decision.state; a result's metrics["change"])."""

    REGRESSION = "regression"
    UNCHANGED = "unchanged"
    IMPROVED = "improved"
    UNDECIDED = "undecided"  # not settled within its budget
    PENDING = "pending"  # not settled yet: another pair of workers measures it


class Side(Word):
    """compare's two torches (Report.role, when a report is one side of a comparison)."""

    BASELINE = "baseline"
    CANDIDATE = "candidate"


class Verdict(str, enum.Enum):
    """The verdict of a whole run, as written to the `verdict` output."""

    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"


def check_id(workload: str, dtype: str, aspect: str) -> str:
    """The stable name of a check, as it appears in every report: `workload[dtype]/aspect`."""
    return f"{workload}[{dtype}]/{aspect}"


@dataclass(frozen=True)
class CheckSpec:
    """What to run: one aspect of one workload on one device in one dtype."""

    workload: str
    aspect: str
    device: str
    dtype: str
    factory: str = ""  # "module:function" for user workloads; "" for built-ins
    params: dict[str, Any] = field(default_factory=dict)  # thresholds the worker needs (rtol, atol, ...)

    @property
    def id(self) -> str:
        return check_id(self.workload, self.dtype, self.aspect)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CheckSpec:
        return cls(**data)


@dataclass(frozen=True)
class Observation:
    """What the worker saw for one check: raw metrics, or why it could not measure them.

    status: a Status word ("ok": metrics hold the measurement; "skipped": message says why; "exception": message and
    traceback say what was raised; "crash", "timeout": the worker died or was killed in it).
    """

    id: str
    status: str
    metrics: dict[str, Any] = field(default_factory=dict)
    message: str = ""
    traceback: str = ""
    duration_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Observation:
        return cls(**data)


@dataclass(frozen=True)
class CheckResult:
    """What was decided for one check, with everything a report needs to explain it.

    `reason` is one line; `details` may hold several (top mismatches, stderr tail).
    """

    workload: str
    aspect: str
    device: str
    dtype: str
    outcome: Outcome
    reason: str = ""
    metrics: dict[str, Any] = field(default_factory=dict)
    thresholds: dict[str, Any] = field(default_factory=dict)
    duration_s: float = 0.0
    repro: str = ""
    details: str = ""

    @property
    def fail_kind(self) -> str:
        """The `--fail-on` kind this result counts as when it fails: its A/B aspect's (compile time and compiled
        latency count as latency) or warnings when it failed as such; correctness otherwise (every error and check not run too)."""
        return FAIL_KINDS.get(self.aspect, "correctness") if self.outcome is Outcome.FAILED else "correctness"

    @property
    def id(self) -> str:
        return check_id(self.workload, self.dtype, self.aspect)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["outcome"] = self.outcome.value
        data["id"] = self.id
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CheckResult:
        data = {k: v for k, v in data.items() if k != "id"}
        data["outcome"] = Outcome(data["outcome"])
        return cls(**data)


@dataclass(frozen=True)
class Report:
    """One run of the suite on one device with one torch: the contents of report.json.

    `label` names the torch under test ("2.13.0+cpu"). `role` is "baseline" or "candidate" in a
    comparison ("" for a single run); a baseline's results inform and never decide the verdict.
    `infra_error` is set when the run could not happen at all (interpreter missing, torch not importable).
    `complete` is False while the run is in progress or when it was killed.
    """

    tool_version: str
    device: str
    requested_device: str
    label: str
    command: list[str]
    started: str
    finished: str = ""
    complete: bool = False
    environment: dict[str, Any] = field(default_factory=dict)
    thresholds: dict[str, Any] = field(default_factory=dict)
    results: tuple[CheckResult, ...] = ()
    infra_error: str = ""
    role: str = ""

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["results"] = [r.to_dict() for r in self.results]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Report:
        data = dict(data)
        data["results"] = tuple(CheckResult.from_dict(r) for r in data.get("results", ()))
        return cls(**data)

    def counts(self) -> dict[str, int]:
        """How many checks ended in each outcome (every outcome present, zero when none)."""
        counts = {o.value: 0 for o in Outcome}
        for r in self.results:
            counts[r.outcome.value] += 1
        return counts

    def verdict(self) -> Verdict:
        """error: the run could not happen; failed: a check failed or crashed, or nothing ran."""
        if self.infra_error:
            return Verdict.ERROR
        c = self.counts()
        if c["failed"] or c["error"] or c["not-run"]:
            return Verdict.FAILED
        if not c["passed"] and not c["suspicious"]:
            return Verdict.FAILED  # nothing ran: fails by default
        return Verdict.PASSED


@dataclass(frozen=True)
class BisectStep:
    """One build judged during a bisection: good, bad or skip, and why (one line per check that decided)."""

    index: int
    build: str
    verdict: str  # good | bad | skip
    reason: str = ""
    date: str = ""  # a nightly's date, from its version
    git: str = ""  # torch.version.git_version of the build, when it could be installed
    seconds: float = 0.0
    checks: tuple[CheckResult, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["checks"] = [c.to_dict() for c in self.checks]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BisectStep:
        data = dict(data)
        data["checks"] = tuple(CheckResult.from_dict(c) for c in data.get("checks", ()))
        return cls(**data)


@dataclass(frozen=True)
class Bisection:
    """A bisection's record: the builds in order, each step, and what was found.

    `outcome`: "found" (first bad build named), "range" (narrowed to the first bad build and the builds
    before it that could not be judged), "not-reproduced" (the bad build does not fail, or the good one
    does: nothing to bisect), "error" (the bad build could not be judged), "running" (in progress or killed).
    """

    tool_version: str
    command: list[str]
    started: str
    device: str
    checks: list[str]
    builds: list[str]
    outcome: str = "running"
    reason: str = ""
    finished: str = ""
    steps: tuple[BisectStep, ...] = ()
    last_good: str = ""
    first_bad: str = ""
    skipped_between: list[str] = field(default_factory=list)
    compare_url: str = ""
    installs: int = 0

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["steps"] = [s.to_dict() for s in self.steps]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Bisection:
        data = dict(data)
        data["steps"] = tuple(BisectStep.from_dict(s) for s in data.get("steps", ()))
        return cls(**data)
