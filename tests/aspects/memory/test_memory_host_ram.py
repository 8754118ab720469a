"""Host RAM: each memory check's peak resident-set growth, recorded on both sides and judged A/B in compare.

A torch that stages 64 MiB in host memory during every linear (as CPU offload does) leaves torch's own memory
counters unchanged: before host RAM was measured, compare passed it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import results_by_id, run_cli
from harness import interpreter

pytestmark = pytest.mark.usefixtures("torch_python")
CHECK = "mlp[float32]/memory"


def compare(baseline: str, candidate: str, out: Path) -> tuple[int, dict, dict]:
    proc = run_cli("compare", "--baseline-python", baseline, "--candidate-python", candidate, "--device", "cpu",
                   "--only", CHECK, "--out", str(out), "--no-job-summary", "--threads", "1")
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads((out / "report.json").read_text())
    return proc.returncode, results_by_id(doc["reports"][0])[CHECK], results_by_id(doc["reports"][1])[CHECK]


def test_host_ram_growth_fails_compare_where_torchs_counters_see_nothing(tmp_path: Path, torch_python: str) -> None:
    broken = str(interpreter(torch_python, tmp_path / "broken", breaks=["host-ram-64mib"]))
    code, base, cand = compare(torch_python, broken, tmp_path / "out")
    assert code == 1 and cand["outcome"] == "failed", cand["reason"]
    assert cand["reason"].startswith("regression: host RAM (peak resident set growth)")
    assert cand["metrics"]["host"]["change"] == "regression"
    assert cand["metrics"]["host_peak_bytes"] >= 64 * 2**20 > base["metrics"]["host_peak_bytes"]
    assert "unchanged: peak memory" in cand["reason"]  # torch's own counter: the same


def test_host_ram_aa_passes_and_both_sides_record_it(tmp_path: Path, torch_python: str) -> None:
    code, base, cand = compare(torch_python, torch_python, tmp_path / "out")
    assert code == 0 and cand["outcome"] == "passed", cand["reason"]
    assert "host_peak_bytes" in base["metrics"] and "host_peak_bytes" in cand["metrics"]
    assert cand["metrics"]["host"]["change"] in ("unchanged", "improved")
    assert "host RAM (peak resident set growth)" in cand["reason"]


def test_run_records_host_ram_in_the_memory_check(tmp_path: Path, torch_python: str) -> None:
    proc = run_cli("run", "--python", torch_python, "--device", "cpu", "--only", CHECK, "--out", str(tmp_path),
                   "--no-job-summary")
    assert proc.returncode == 0, proc.stdout[-3000:]
    result = results_by_id(json.loads((tmp_path / "report.json").read_text()))[CHECK]
    assert result["metrics"]["host_peak_bytes"] >= 0 and "VmHWM" in result["metrics"]["host_memory_api"]
    assert "host RAM +" in result["reason"]
