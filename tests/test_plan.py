"""The built-in suite as planned: stable names and --only matching."""

from __future__ import annotations

from torch_upgrade_check import suite
from torch_upgrade_check.model import ASPECTS, STACK_ASPECTS


def test_builtin_suite_covers_every_aspect_and_the_named_workloads() -> None:
    ids = {s.id for s in suite.plan(suite.BUILTIN, "cpu")}
    # cross-version and the stack's checks are planned by compare, beside the built-in aspects; compile-time is
    # opt-in (--compile-time), aoti for your workloads only (a compile takes a minute), and onnx too (it needs an
    # optional extra in the environment under test, and a team declares the exporter its code calls); artifact is a
    # file the team ships (config `artifacts:`); ddp is opt-in (--ddp: a torchrun, 25 s of CPU); op-latency is
    # compare's, beside each latency check
    assert {s.aspect for s in suite.plan(suite.BUILTIN, "cpu")} == set(ASPECTS) - {"cross-version", "compile-time",
                                                                                    "aoti", "onnx", "artifact", "ddp",
                                                                                    "op-latency", *STACK_ASPECTS}
    with_ddp = [suite.with_ddp(w) for w in suite.BUILTIN]
    assert {s.id for s in suite.plan(with_ddp, "cpu", ["ddp"])} == {"transformer_block[float32]/ddp"}
    timed = [suite.with_compile_time(w) for w in suite.BUILTIN]
    assert {s.id for s in suite.plan(timed, "cpu", ["compile-time"])} == {
        s.id.replace("/compile", "/compile-time") for s in suite.plan(suite.BUILTIN, "cpu", ["compile"])}
    for expected in ("mlp[float32]/numerics", "cnn[float32]/compile", "transformer_block[float32]/fsdp2",
                     "sdpa[bfloat16]/numerics", "flex_attention_causal[float32]/compile",
                     "flex_attention_alibi[float32]/numerics", "flex_attention_sliding_window[float32]/latency",
                     "flex_attention_none[float32]/memory", "matmul[float16]/numerics",
                     "matmul[bfloat16]/cross-backend", "transformer_block[float32]/determinism"):
        assert expected in ids


def test_only_matches_ids_workloads_aspects_and_globs() -> None:
    def ids(*only: str) -> list[str]:
        return [s.id for s in suite.plan(suite.BUILTIN, "cpu", only)]

    assert ids("mlp[float32]/latency") == ["mlp[float32]/latency"]
    # warnings last: it reports what the others raised
    assert ids("mlp") == [f"mlp[float32]/{a}" for a in (*suite.TRAINED_ASPECTS[:-1], *suite.MODE, "compiled-latency",
                                                         *suite.BUILTIN_ARTIFACTS, "dataloader", "warnings")]
    assert set(ids("latency")) == {s.id for s in suite.plan(suite.BUILTIN, "cpu") if s.aspect == "latency"}
    # two of the four also have deterministic-backward
    assert all(i.startswith("flex_attention") for i in ids("flex*")) and len(ids("flex*")) == 4 * 7 + 2
    # warnings reports what the workload's other checks raised: it comes after them
    assert ids("flex_attention_causal")[-1] == "flex_attention_causal[float32]/warnings"
    assert ids("matmul[bfloat16]/*") == [f"matmul[bfloat16]/{a}" for a in (*suite.OP_ASPECTS[:-1], *suite.MODE, "warnings")]
    # compile-mode is an aspect of its own: `compile` names the default one only, `compile*` both; its id is the same on
    # every device (the mode differs: the check's reason and metrics say which)
    assert ids("compile-mode") == ["mlp[float32]/compile-mode", *(f"matmul[{d}]/compile-mode" for d in
                                                                  ("float32", "float16", "bfloat16"))]
    assert "mlp[float32]/compile-mode" not in ids("compile") and "mlp[float32]/compile-mode" in ids("mlp[float32]/compile*")
    assert ids(suite.rerun_pattern("mlp", "float32", "compile-mode")) == ["mlp[float32]/compile-mode"]
    assert [s.id for s in suite.plan(suite.BUILTIN, "cuda", ["compile-mode"])] == ids("compile-mode")
    assert ids("no-such-thing") == []


def test_plan_order_is_stable() -> None:
    assert [s.id for s in suite.plan(suite.BUILTIN, "cuda")] == [s.id for s in suite.plan(suite.BUILTIN, "cuda")]


def test_every_aspect_has_a_cost_for_list_and_an_unmeasured_one_says_so() -> None:
    from torch_upgrade_check.report import costs

    assert set(costs.ASPECT_COST_S) == set(ASPECTS)
    lines = costs.listing([("mlp[float32]/numerics", "numerics"), ("x[-]/nothing", "nothing")], compare=True)
    assert lines[0].startswith("mlp[float32]/numerics  ~") and lines[1] == "x[-]/nothing           ?"
    assert lines[2].startswith("# seconds a check, by aspect, measured on ") and lines[2].endswith("within --ab-budget a check")


def test_the_cost_table_in_the_docs_is_the_one_list_prints() -> None:
    """docs/benchmarks.md's per-aspect table and `report/costs.py` (aspects.TABLE's costs) are one measurement: a figure
    changed in one place only fails here."""
    import re
    from pathlib import Path

    from torch_upgrade_check.report import costs

    docs = (Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md").read_text()
    rows = dict(re.findall(r"^\| `([\w-]+)` \| ([^|]+) \|", docs, re.MULTILINE))
    for aspect, (median, most, _) in costs.ASPECT_COST_S.items():
        if median is None:
            continue
        want = costs._seconds(median) + (f" ({costs._seconds(most)})" if most != median else "")
        assert rows.get(aspect, "").strip() == want, (aspect, rows.get(aspect), want)
