"""A check's result does not depend on what ran before it in its worker (issue 46 item 11): real torch, real workers."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import run_cli

from torch_upgrade_check.schema import PLAN_KIND, PLAN_VERSION

pytestmark = pytest.mark.usefixtures("torch_python")

MASKED_FLEX = ("flex_attention_causal", "flex_attention_sliding_window", "flex_attention_alibi")


def _check(workload: str, aspect: str, store: Path) -> dict:
    return {"workload": workload, "aspect": aspect, "device": "cpu", "dtype": "float32", "factory": "",
            "params": {"mode": "save", "store": str(store)} if aspect == "cross-version" else {}}


def _worker(python: str, folder: Path, checks: list[dict]) -> dict[str, dict]:
    """One real worker process over `checks`, in order: each check's observation by id."""
    folder.mkdir(parents=True, exist_ok=True)
    plan, events = folder / "plan.json", folder / "events.jsonl"
    plan.write_text(json.dumps({"kind": PLAN_KIND, "schema_version": PLAN_VERSION, "threads": 1, "checks": checks}))
    proc = subprocess.run([python, "-m", "torch_upgrade_check.worker", str(plan), str(events)],  # noqa: PLW1510
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = [json.loads(line) for line in events.read_text().splitlines()]
    return {e["id"]: e for e in found if e["event"] == "observation"}


def test_flex_attention_with_a_mask_after_the_checks_before_it_is_what_it_is_alone(tmp_path: Path,
                                                                                 torch_python: str) -> None:
    """The baseline's side of compare's cross-version checks (each workload's outputs saved, its aten ops recorded),
    in the built-in suite's order, then the masked FlexAttention workloads' numerics: each ends as it does alone
    in a fresh worker. Before each check started from Dynamo's reset, the op recording of a FlexAttention workload
    (which torch 2.13's FlexAttention rejects under a dispatch mode) left Dynamo's caches so that every later
    FlexAttention call with a mask failed to compile."""
    store = tmp_path / "store"
    before = [_check(w, "cross-version", store) for w in ("mlp", "sdpa", "flex_attention_none", *MASKED_FLEX)]
    after = [_check(w, "numerics", store) for w in MASKED_FLEX]
    in_sequence = _worker(torch_python, tmp_path / "sequence", before + after)
    for check in after:
        spec_id = f"{check['workload']}[float32]/numerics"
        alone = _worker(torch_python, tmp_path / check["workload"], [check])[spec_id]
        assert alone["status"] == "ok", alone.get("message")
        assert in_sequence[spec_id]["status"] == alone["status"], in_sequence[spec_id].get("message")
    failed = {i: o.get("message") for i, o in in_sequence.items() if o["status"] != "ok"}
    assert not failed  # the cross-version saves, FlexAttention's with masks included, all ran


def test_compare_judges_every_cross_version_check_of_the_suite_against_the_same_torch(tmp_path: Path,
                                                                                    torch_python: str) -> None:
    """The sequence the issue saw (`compare --only '*cross-version'`, torch 2.13.0 on both sides): every
    FlexAttention workload's outputs are saved by the baseline and judged by the candidate; none is skipped."""
    proc = run_cli("compare", "--baseline-python", torch_python, "--candidate-python", torch_python, "--device",
                   "cpu", "--threads", "1", "--only", "*cross-version", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    baseline, candidate = json.loads((tmp_path / "report.json").read_text())["reports"]
    for report in (baseline, candidate):
        outcomes = {r["id"]: r["outcome"] for r in report["results"]}
        assert {f"{w}[float32]/cross-version" for w in MASKED_FLEX} <= set(outcomes)
        assert set(outcomes.values()) == {"passed"}, outcomes
    assert (tmp_path / "summary.md").read_text().startswith("## ✅ passed")  # nothing left unjudged
