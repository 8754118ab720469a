"""The detector benchmark's figures (benchmarks/detector.py): rates with exact intervals, and the noise read back
from the workers' event logs (pure: no torch, no comparison run)."""

from __future__ import annotations

import json
import math
import random
import sys
from pathlib import Path

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import detector  # noqa: E402


def events(path: Path, check: str, medians: list[float]) -> None:
    """A worker's event log: a warm-up observation, then one per round."""
    lines = [{"event": "hello"}]
    for ms in [999.0, *medians]:
        lines += [{"event": "start", "id": check},
                  {"event": "observation", "id": check, "status": "ok", "metrics": {"samples_ms": [ms]}}]
    path.write_text("".join(json.dumps(e) + "\n" for e in lines))


def test_pair_series_is_read_back_per_fresh_pair_without_the_warm_up(tmp_path: Path) -> None:
    check = "large[float32]/latency"
    events(tmp_path / "ab-baseline-b1-1.events.jsonl", check, [100.0, 100.0])
    events(tmp_path / "ab-candidate-b1-1.events.jsonl", check, [200.0, 110.0])
    events(tmp_path / "ab-baseline-b2-1.events.jsonl", check, [100.0])
    events(tmp_path / "ab-candidate-b2-1.events.jsonl", check, [150.0])
    series = detector.pair_series(tmp_path, check)
    assert series == [[round(math.log(2), 6), round(math.log(1.1), 6)], [round(math.log(1.5), 6)]]
    assert detector.pair_series(tmp_path, "other[float32]/latency") == []


def test_the_noise_figures_recover_a_known_pair_offset() -> None:
    rng = random.Random(1)
    pairs = [[off + rng.gauss(0, 0.08) for _ in range(24)] for off in (rng.gauss(0, 0.03) for _ in range(300))]
    runs = [{"rows": [{"batches": 3, "pair_log_ratios": pairs[i:i + 3]}]} for i in range(0, 300, 3)]
    noise = detector.pair_noise(runs)
    assert noise is not None and noise["pairs"] == 300
    assert 0.07 < noise["round_sd"] < 0.09 and 0.025 < noise["pair_offset_sd"] < 0.04
    assert noise["pair_sd"] < noise["pair_sd_upper95"] < 1.2 * noise["pair_sd"]
    assert detector.pair_noise([{"rows": [{"batches": 2, "pair_log_ratios": pairs[:2]}]}]) is None  # too few pairs


def test_rows_count_what_compare_fails_with_an_exact_interval() -> None:
    row = {"id": "large[float32]/latency", "aspect": "latency", "ratio": 2.0, "batches": 3, "seconds": 12.0}
    runs = [{"rows": [{**row, "change": "regression", "outcome": "failed"}], "seconds": 30.0}] * 9
    runs += [{"rows": [{**row, "change": "undecided", "outcome": "failed"}], "seconds": 30.0}]
    text = detector.render_sizes({"sizes": {"large": {"1.000": runs}}})[-1]
    assert "| large | +100.0% | 2.000 | 10 of 10 (100.0%; 95% CI 69.2%–100.0%) | 1 | 0 | 3 / 3 |" in text


def test_the_compiled_latency_part_has_its_rows_and_its_aa_noise() -> None:
    check = "small[float32]/compiled-latency"
    row = {"id": check, "aspect": "compiled-latency", "batches": 4, "seconds": 3.0}
    slowed = [{"rows": [{**row, "ratio": 1.24, "change": "regression", "outcome": "failed"}], "seconds": 40.0}] * 10
    aa = [{"rows": [{**row, "ratio": 1.0, "change": "unchanged", "outcome": "passed",
                     "pair_log_ratios": [[0.01, -0.01, 0.02], [0.0, 0.01, -0.02]]}], "seconds": 30.0}] * 3
    res = {"aa": [], "slowdown": {}, "drift": {}, "compiled": {"check": check, "0.250": slowed, "0.000": aa}}
    text = detector.render(res)
    assert f"| {check} | compiled graph calls +25% | 1.240 | 10 of 10 (100.0%; 95% CI 69.2%–100.0%) |" in text
    assert f"| {check} | A/A | 1.000 | 0 of 3 (0.0%; 95% CI 0.0%–70.8%) |" in text
    assert f"| {check} | A/A | 6 |" in text  # its fresh pairs in the noise table
