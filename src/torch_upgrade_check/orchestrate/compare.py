"""Baseline vs candidate torch on one machine in one job: which checks each side runs (latency and memory A/B live in
`measure`; how a side's results are decided, in analysis.sides)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from torch_upgrade_check.aspects import AB_ASPECTS, LAST, PER_SIDE_ASPECTS, SAVED_ASPECTS, Threshold, ab_of
from torch_upgrade_check.model import CheckSpec
from torch_upgrade_check.orchestrate import session


@dataclass(frozen=True)
class Thresholds:
    latency: float = 0.10
    memory: float = 0.20
    compile_time: float = 0.25

    def by_aspect(self) -> dict[str, float]:
        """Each A/B aspect's threshold, as measure.measure takes them (aspects.TABLE says which judges each)."""
        of = {Threshold.LATENCY: self.latency, Threshold.MEMORY: self.memory, Threshold.COMPILE_TIME: self.compile_time}
        return {a: of[ab_of(a).threshold] for a in AB_ASPECTS}


def correctness_specs(settings: session.Settings, device: str) -> list[CheckSpec]:
    """The checks each side runs alone: not the A/B ones, nor the saved ones (planned per side), nor warnings (last)."""
    return session.plan(settings, device, aspects=[a for a in _all_aspects(settings)
                                                   if a not in (*AB_ASPECTS, *SAVED_ASPECTS, *LAST)])


def warnings_specs(settings: session.Settings, device: str) -> list[CheckSpec]:
    """Planned last on each side: each reports what every other check of its workload raised in that worker."""
    return session.plan(settings, device, aspects=list(LAST))


def _all_aspects(settings: session.Settings) -> list[str]:
    return sorted({a for w in settings.workloads for a in w.aspects})


def saved_mark(store: Path) -> Path:
    """The file that says the baseline has saved all it will: a candidate's cross-version check waits for it."""
    return store / ".complete"


def cross_version_specs(settings: session.Settings, device: str, store: Path, mode: str) -> list[CheckSpec]:
    """One cross-version check per workload and dtype: every built-in with numerics, and the user's
    workloads that list cross-version among their aspects (the default). The candidate's (mode "compare")
    start only once the baseline's are complete (param "after": the worker waits for that file)."""
    after = {"after": str(saved_mark(store))} if mode == "compare" else {}
    wanted = {w.name for w in settings.workloads if "cross-version" in w.aspects or (not w.factory and "numerics" in w.aspects)}
    specs = []
    for s in session.plan(replace(settings, only=()), device, aspects=["numerics", "cross-version"]):  # --only: below
        spec = CheckSpec(s.workload, "cross-version", device, s.dtype, s.factory,
                         {**s.params, "mode": mode, "store": str(store), **after})
        if s.workload in wanted and spec.id not in {x.id for x in specs} and _selected(settings, spec):
            specs.append(spec)
    return specs


def op_latency_specs(settings: session.Settings, device: str, store: Path) -> list[CheckSpec]:
    """One op-latency check beside each latency check (its workload and dtype): the baseline's recorded ops timed on
    both sides (orchestrate.optiming). `--only` selects it by its own id, workload or aspect (`op-latency`)."""
    from torch_upgrade_check.suite import _matches

    specs = []
    for s in session.plan(replace(settings, only=()), device, aspects=["latency"]):
        spec = CheckSpec(s.workload, "op-latency", device, s.dtype, s.factory, {**s.params, "store": str(store)})
        if not settings.only or any(_matches(p, spec) for p in settings.only):
            specs.append(spec)
    return specs


def saved_specs(settings: session.Settings, device: str, store: Path, mode: str) -> list[CheckSpec]:
    """The checkpoint, training-curve, amp, dataloader, artifact (export, jit) and compile checks: the baseline's (mode
    "save") run as alone and keep their files, the candidate's (mode "compare") read the baseline's, once they are
    complete."""
    after = {"after": str(saved_mark(store))} if mode == "compare" else {}
    return [replace(s, params={**s.params, "mode": mode, "store": str(store), **after})
            for s in session.plan(settings, device, aspects=list(PER_SIDE_ASPECTS))]


def _selected(settings: session.Settings, spec: CheckSpec) -> bool:
    from torch_upgrade_check.suite import _matches

    return not settings.only or any(_matches(p, spec) or _matches(p, replace(spec, aspect="numerics"))
                                    for p in settings.only)
