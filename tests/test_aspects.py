"""aspects.TABLE is the one home of the aspects' vocabulary: every list the other modules use agrees with it (no torch)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from torch_upgrade_check import aspects, config, suite
from torch_upgrade_check.aspects import ASPECT, FailKind, InCompare, Runs, Threshold
from torch_upgrade_check.model import ABState, Observation, Side, Status
from torch_upgrade_check.orchestrate import measure
from torch_upgrade_check.orchestrate.compare import Thresholds
from torch_upgrade_check.report import costs


def test_every_aspect_a_workload_can_have_is_in_the_table_and_runs_in_a_worker() -> None:
    named = {a for w in suite.BUILTIN for a in w.aspects} | set(config.WORKLOAD_ASPECTS)
    assert named <= set(aspects.ASPECTS)
    assert {ASPECT[a].runs for a in named} <= {Runs.WORKER, Runs.TORCHRUN}
    assert {ASPECT[a].compare for a in named} <= {InCompare.ALONE, InCompare.SAVED, InCompare.AB}
    # a compare-only aspect is planned by compare alone: `run` drops cross-version, and nothing names op-latency
    assert {a for a in named if ASPECT[a].compare_only} == {"cross-version"}


def test_what_is_opt_in_for_a_teams_workload_says_what_plans_it() -> None:
    assert config.OPT_IN_ASPECTS == ("compile-time", "compile-cache", "compiled-latency", "export", "jit", "aoti", "onnx")
    assert not any(ASPECT[a].opt_in for a in config.DEFAULT_ASPECTS)
    assert ASPECT["ddp"].opt_in == "--ddp" and ASPECT["api"].opt_in.startswith("--scan")


def test_the_ab_aspects_are_measured_judged_and_shown_in_threshold_order() -> None:
    # the summary's A/B tables and compare's measuring follow this order: latency's threshold, memory's, compile time's
    assert aspects.AB_ASPECTS == ("latency", "compiled-latency", "memory", "compile-time")
    assert list(Thresholds(0.1, 0.2, 0.3).by_aspect().items()) == [("latency", 0.1), ("compiled-latency", 0.1),
                                                                  ("memory", 0.2), ("compile-time", 0.3)]
    assert all(measure.first_rounds(name) >= 2 for name in aspects.AB_ASPECTS)  # an ABBA cycle at least
    for name in aspects.AB_ASPECTS:
        figure = aspects.ab_of(name)
        memory = figure.threshold is Threshold.MEMORY
        assert ASPECT[name].kind is (FailKind.MEMORY if memory else FailKind.LATENCY), name
        assert (figure.unit, name in aspects.TIMED) == (("bytes", False) if memory else ("ms", True)), name
    assert aspects.LATENCY_LIKE == ("latency", "compiled-latency")


def test_the_derived_lists_are_views_of_the_table() -> None:
    assert aspects.STACK_ASPECTS == ("resolve", "imports", "abi", "api")
    assert all(ASPECT[a].runs is Runs.HOST for a in aspects.STACK_ASPECTS)
    assert aspects.FAIL_ON == ("correctness", "latency", "memory", "warnings")
    assert aspects.FAIL_KINDS == {"latency": "latency", "op-latency": "latency", "memory": "memory",
                                  "compile-time": "latency", "compiled-latency": "latency", "warnings": "warnings",
                                  "fleet-memory": "memory"}
    assert "fleet-memory" not in aspects.ASPECTS  # decided from a report: no check plans it
    assert set(aspects.SAVED_ASPECTS) == {"cross-version", *aspects.PER_SIDE_ASPECTS}
    assert suite.MODEL_ASPECTS == tuple(a for a in suite.TRAINED_ASPECTS if a not in ("checkpoint", "training-curve", "amp"))
    assert (aspects.LAST, aspects.FLOAT32_ONLY, aspects.FIRST_DTYPE_ONLY) == (("warnings",), ("amp",), ("dataloader",))
    assert list(costs.ASPECT_COST_S) == list(aspects.ASPECTS)  # one cost an aspect, from the table


def test_the_enums_are_their_words_in_json_text_and_reprs() -> None:
    obs = Observation("w[float32]/latency", Status.SKIPPED, message="why")
    assert json.dumps(asdict(obs)) == json.dumps(asdict(Observation("w[float32]/latency", "skipped", message="why")))
    metrics = {"change": ABState.REGRESSION, "side": Side.CANDIDATE}
    assert json.dumps(metrics) == '{"change": "regression", "side": "candidate"}'
    assert (f"{ABState.UNDECIDED}", str(Status.TIMEOUT), repr(metrics)) == (
        "undecided", "timeout", "{'change': 'regression', 'side': 'candidate'}")
    assert {"regression": 1}[ABState.REGRESSION] == 1 and Status("crash") is Status.CRASH


def test_what_a_workload_may_list_is_derived_from_the_table_and_the_config_schema_agrees() -> None:
    """config.WORKLOAD_ASPECTS is aspects.WORKLOAD_ASPECTS (not spelled again), and the config schema's enum is the
    same names in the same order (the order error messages and docs list them in): each a worker aspect of the table."""
    schema = json.loads((Path(__file__).resolve().parents[1] / "schema" / "torch-upgrade-check.schema.json").read_text())
    enum = schema["properties"]["workloads"]["items"]["properties"]["aspects"]["items"]["enum"]
    assert config.WORKLOAD_ASPECTS is aspects.WORKLOAD_ASPECTS
    assert tuple(enum) == aspects.WORKLOAD_ASPECTS, "regenerate the schema's aspects enum from aspects.WORKLOAD_ASPECTS"
    assert all(ASPECT[a].runs is Runs.WORKER and ASPECT[a].compare is not InCompare.OPS for a in enum)
    assert all(ASPECT[a].listed for a in enum) and {a.name for a in aspects.TABLE if not a.listed} == {
        "compile-mode", "deterministic-backward", "sdpa-backends", "artifact"}
