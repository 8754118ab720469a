"""What a config plans runs in real workers: the example's factories pass, faulty ones are reported, others go on."""

from __future__ import annotations

from pathlib import Path

import pytest
from config_helpers import EXAMPLE
from conftest import FIXTURES

from torch_upgrade_check import suite
from torch_upgrade_check.analysis.verdicts import decide
from torch_upgrade_check.configfile.read import load_config
from torch_upgrade_check.model import CheckSpec, Outcome
from torch_upgrade_check.orchestrate.workers import run_worker


def test_config_workloads_run_in_real_workers(tmp_path: Path, torch_python: str) -> None:
    path = tmp_path / "torch-upgrade-check.yml"
    path.write_text(
        f"version: 1\nsuite: none\npython-path: ['{EXAMPLE}', '{FIXTURES}']\n"
        "workloads:\n"
        "  - {name: classifier, factory: 'tinymodels.models:build_classifier', dtypes: [float32, bfloat16]}\n"
        "  - {name: encoder, factory: 'tinymodels.models:build_encoder', rtol: 1.0e-3}\n"
        "  - {name: boom, factory: 'faulty:raises'}\n"
        "  - {name: segv, factory: 'faulty:segfault'}\n")
    cfg = load_config(path, explicit=True)
    planned = suite.plan(cfg.workloads_for_suite(), "cpu", only=["numerics", "determinism"])
    specs = [CheckSpec(s.workload, s.aspect, s.device, s.dtype, s.factory, cfg.tolerances_for(s.workload))
             for s in planned]
    session = run_worker(torch_python, specs, log_dir=tmp_path / "logs", timeout_s=300,
                         python_path=cfg.resolved_python_path())
    results = {s.id: decide(s, session.observations[s.id]) for s in specs}
    outcomes = {k: r.outcome for k, r in results.items()}
    assert outcomes == {
        "classifier[float32]/numerics": Outcome.PASSED,
        "classifier[float32]/determinism": Outcome.PASSED,
        "classifier[bfloat16]/numerics": Outcome.PASSED,
        "classifier[bfloat16]/determinism": Outcome.PASSED,
        "encoder[float32]/numerics": Outcome.PASSED,
        "encoder[float32]/determinism": Outcome.SKIPPED,  # (model, inputs): no loss, so no training step
        "boom[float32]/numerics": Outcome.ERROR,
        "boom[float32]/determinism": Outcome.ERROR,
        "segv[float32]/numerics": Outcome.ERROR,
        "segv[float32]/determinism": Outcome.ERROR,
    }, {k: r.reason for k, r in results.items()}
    assert "factory exploded on purpose" in results["boom[float32]/numerics"].reason
    assert "SIGSEGV" in results["segv[float32]/numerics"].reason
    assert results["encoder[float32]/numerics"].thresholds["rtol"] == pytest.approx(1e-3)  # per-workload rtol reached
