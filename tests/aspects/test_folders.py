"""An aspect with a folder is whole there: run.py, judge.py (a frozen, typed Metrics and its rule), render.py (its
columns), and no generic layer spells its name: the worker loop, verdicts and the summary find it through the row."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
from pathlib import Path

import pytest

from torch_upgrade_check.aspects import TABLE, Runs, Stage, part
from torch_upgrade_check.aspects._metrics import Recorded
from torch_upgrade_check.report.columns import Column

PKG = Path(__file__).resolve().parents[2] / "src" / "torch_upgrade_check"
FOLDERED = [a for a in TABLE if a.folder]
WORKER_SIDE = (Runs.WORKER, Runs.TORCHRUN)  # rows whose checks run in a worker (the others have no run.py)
# the generic layers: they reach an aspect's code through aspects.part, never by its name
GENERIC = ("worker/checks.py", "analysis/verdicts.py", "report/checks.py", "report/comparison.py", "report/summary.py",
           "report/junit.py", "orchestrate/measure.py", "analysis/sides.py", "report/unjudged.py", "worker/compiling.py",
           "commands/argv.py", "commands/compare.py", "commands/bisect.py", "commands/stack_checks.py")


# each row's side besides judge.py and render.py: the worker's run.py, the host's host.py (a check the orchestrator
# runs beside the workers), or none (decided from a finished report)
SIDE_OF = {Runs.WORKER: "run", Runs.TORCHRUN: "run", Runs.HOST: "host", Runs.REPORT: None}


def _imports(path: Path) -> set[str]:
    return {n.module for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ImportFrom) and n.module}


@pytest.mark.parametrize("aspect", FOLDERED, ids=lambda a: a.name)
def test_the_folder_holds_every_part(aspect) -> None:
    folder = PKG / "aspects" / aspect.folder
    side = SIDE_OF[aspect.runs]
    roles = ("judge", "render", *([side] if side else []))
    assert all((folder / f"{role}.py").is_file() for role in roles), sorted(p.name for p in folder.iterdir())
    others = [s for s in ("run", "host") if s != side and (folder / f"{s}.py").exists()]
    assert others == [], f"a {aspect.runs} aspect has no {', '.join(others)}"
    judge, render = part(aspect.name, "judge"), part(aspect.name, "render")
    metrics = judge.Metrics
    assert issubclass(metrics, Recorded) and metrics.__dataclass_params__.frozen
    assert all(f.type != "Any" for f in dataclasses.fields(metrics)), "every field has its type"
    # a worker's result is judged from its Metrics (verdicts); one decided from a report, from the report's results;
    # a host check's by its host.py with the rule of its judge.py (the host side reads files and runs processes)
    if aspect.runs in WORKER_SIDE:
        assert callable(judge.judge)
    elif aspect.runs is Runs.REPORT:
        assert callable(judge.judge_report)
    else:
        assert judge.__name__ in _imports(folder / "host.py"), "host.py decides with its judge.py's rule"
    assert render.COLUMNS and all(isinstance(c, Column) for c in (*render.COLUMNS, render.PRIMARY))


@pytest.mark.parametrize("aspect", FOLDERED, ids=lambda a: a.name)
def test_no_generic_layer_spells_a_foldered_aspects_name(aspect) -> None:
    spelled = [path for path in GENERIC if re.search(rf"[\"']{re.escape(aspect.name)}[\"']", (PKG / path).read_text())]
    assert spelled == []


@pytest.mark.parametrize("path", GENERIC)
def test_no_generic_layer_imports_an_aspects_folder(path: str) -> None:
    # a folder imported by name is an aspect named: the generic layers reach its modules through aspects.part
    folders = {a.folder for a in FOLDERED}
    named = sorted(m for m in _imports(PKG / path) if m.startswith("torch_upgrade_check.aspects.")
                   and m.split(".")[2] in folders)
    assert named == []


# the hooks a host check's host.py defines, which commands/stack_checks calls through the row (its stage), and the
# parameters each takes; `blocking` and `torch_not_on_index` are optional (a check run before installing may stop it)
HOST_HOOKS = {"planned": ("settings", "only"), "on_host": ("context",)}
OPTIONAL_HOST_HOOKS = {"blocking": ("role", "r", "files", "logs"), "torch_not_on_index": ("s", "sides", "base_python", "out"),
                       "pinned_by_team": ("before", "after")}


@pytest.mark.parametrize("aspect", FOLDERED, ids=lambda a: a.name)
def test_a_host_check_has_a_stage_and_the_hooks_compare_calls(aspect) -> None:
    assert (aspect.stage is not None) == (aspect.runs is Runs.HOST), "a stage is a host check's, and every one has it"
    if aspect.runs is not Runs.HOST:
        return
    assert isinstance(aspect.stage, Stage)
    host = part(aspect.name, "host")
    for name, params in HOST_HOOKS.items():
        assert tuple(inspect.signature(getattr(host, name)).parameters) == params, f"{aspect.name}: host.{name}"
    if aspect.stage is Stage.BEFORE_INSTALL:  # its results may stop the run, with a line saying what it did to torch
        assert isinstance(host.VERB, str) and host.VERB
    for name, params in OPTIONAL_HOST_HOOKS.items():
        hook = getattr(host, name, None)
        if hook is not None:
            assert tuple(inspect.signature(hook).parameters) == params, f"{aspect.name}: host.{name}"


def test_every_aspect_has_a_folder_a_name_not_in_the_table_has_no_parts_and_a_wrong_role_is_refused() -> None:
    assert [a.name for a in TABLE if not a.folder] == []  # the generic layers keep no table of their own to fall back on
    assert part("no-such-aspect", "judge") is None  # another version's report may name one
    with pytest.raises(ValueError, match="run, judge, render"):
        part(FOLDERED[0].name, "verdict")


# The optional hooks a judge.py may define, which the generic layers look up by name, and the parameters each takes:
# a helper of the same name with other parameters would be called as a hook (an fsdp2 helper once was, exit 3).
HOOKS = {"details": ("m",), "judge_in_compare": ("before", "after", "baseline", "candidate", "fail_on"),
         "judged_in_compare_though_skipped": ("before", "after"), "packages_the_team_changed": ("m",),
         "skip_a_pass_on_the_cpu": ("said",), "saved_for_the_candidate": ("m",), "first_divergence": ("r",),
         "judge_within_limits": ("m", "spec", "max_latency_ms")}


@pytest.mark.parametrize("aspect", FOLDERED, ids=lambda a: a.name)
def test_a_judges_hooks_take_what_the_generic_layers_pass(aspect) -> None:
    judge = part(aspect.name, "judge")
    for name, params in HOOKS.items():
        hook = getattr(judge, name, None)
        if hook is not None:
            assert tuple(inspect.signature(hook).parameters) == params, f"{aspect.name}: judge.{name}"


# The constants a judge.py may set, which the generic layers read by name, and their type: REPRO_SWITCH (its repro
# repeats its row's switch where on) and REPRO_FAIL_ON (its repro repeats --fail-on where that names its kind:
# commands/argv), WARNS_BY_DESIGN (its suspicious result never leaves a bisect step unsettled: commands/bisect).
CONSTANTS = {"REPRO_SWITCH": bool, "REPRO_FAIL_ON": bool, "WARNS_BY_DESIGN": bool}


@pytest.mark.parametrize("aspect", FOLDERED, ids=lambda a: a.name)
def test_a_judges_constants_and_its_rows_switch_are_what_the_generic_layers_read(aspect) -> None:
    from torch_upgrade_check.commands.settings import Shared

    judge = part(aspect.name, "judge")
    for name, kind in CONSTANTS.items():
        assert isinstance(getattr(judge, name, kind()), kind), f"{aspect.name}: judge.{name}"
    assert aspect.switch or not getattr(judge, "REPRO_SWITCH", False), "the switch its repro repeats is its row's"
    assert aspect.switch in ("", *(f.name for f in dataclasses.fields(Shared))), "a switch is a settings field"
