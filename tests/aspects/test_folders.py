"""An aspect with a folder is whole there: run.py, judge.py (a frozen, typed Metrics and its rule), render.py (its
columns), and no generic layer spells its name: the worker loop, verdicts and the summary find it through the row."""

from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path

import pytest

from torch_upgrade_check.aspects import ROLES, TABLE, Runs, part
from torch_upgrade_check.aspects._metrics import Recorded
from torch_upgrade_check.report.columns import Column

PKG = Path(__file__).resolve().parents[2] / "src" / "torch_upgrade_check"
FOLDERED = [a for a in TABLE if a.folder]
WORKER_SIDE = (Runs.WORKER, Runs.TORCHRUN)  # rows whose checks run in a worker (the others have no run.py)
# the generic layers: they reach an aspect's code through aspects.part, never by its name
GENERIC = ("worker/checks.py", "analysis/verdicts.py", "report/checks.py", "report/comparison.py", "report/summary.py",
           "report/junit.py", "orchestrate/measure.py")


@pytest.mark.parametrize("aspect", FOLDERED, ids=lambda a: a.name)
def test_the_folder_holds_every_part(aspect) -> None:
    folder = PKG / "aspects" / aspect.folder
    roles = ROLES if aspect.runs in WORKER_SIDE else tuple(r for r in ROLES if r != "run")
    assert all((folder / f"{role}.py").is_file() for role in roles), sorted(p.name for p in folder.iterdir())
    assert aspect.runs in WORKER_SIDE or not (folder / "run.py").exists(), "no worker side: decided from a report"
    judge, render = part(aspect.name, "judge"), part(aspect.name, "render")
    metrics = judge.Metrics
    assert issubclass(metrics, Recorded) and metrics.__dataclass_params__.frozen
    assert all(f.type != "Any" for f in dataclasses.fields(metrics)), "every field has its type"
    # a worker's result is judged from its Metrics (verdicts); one decided from a report, from the report's results
    assert callable(judge.judge if aspect.runs in WORKER_SIDE else judge.judge_report)
    assert render.COLUMNS and all(isinstance(c, Column) for c in (*render.COLUMNS, render.PRIMARY))


@pytest.mark.parametrize("aspect", FOLDERED, ids=lambda a: a.name)
def test_no_generic_layer_spells_a_foldered_aspects_name(aspect) -> None:
    spelled = [path for path in GENERIC if re.search(rf"[\"']{re.escape(aspect.name)}[\"']", (PKG / path).read_text())]
    assert spelled == []


def test_an_aspect_without_a_folder_has_no_parts_and_a_wrong_role_is_refused() -> None:
    bare = next(a.name for a in TABLE if not a.folder)
    assert part(bare, "judge") is None
    with pytest.raises(ValueError, match="run, judge, render"):
        part(FOLDERED[0].name, "verdict")


# The optional hooks a judge.py may define, which the generic layers look up by name, and the parameters each takes:
# a helper of the same name with other parameters would be called as a hook (an fsdp2 helper once was, exit 3).
HOOKS = {"details": ("m",), "judge_in_compare": ("before", "after", "baseline", "candidate", "fail_on"),
         "judge_within_limits": ("m", "spec", "max_latency_ms")}


@pytest.mark.parametrize("aspect", FOLDERED, ids=lambda a: a.name)
def test_a_judges_hooks_take_what_the_generic_layers_pass(aspect) -> None:
    judge = part(aspect.name, "judge")
    for name, params in HOOKS.items():
        hook = getattr(judge, name, None)
        if hook is not None:
            assert tuple(inspect.signature(hook).parameters) == params, f"{aspect.name}: judge.{name}"
