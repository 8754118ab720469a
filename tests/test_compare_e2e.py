"""`compare` end to end: real torch in both sides' workers, injected slowdowns and drift, real installs."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import venv
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ROOT, run_cli

sys.path.insert(0, str(ROOT / "benchmarks"))
from inject import injected_python

pytestmark = pytest.mark.usefixtures("torch_python")


def load(out: Path) -> tuple[dict, dict]:
    doc = json.loads((out / "report.json").read_text())
    assert doc["kind"] == "torch-upgrade-check/comparison"
    baseline, candidate = doc["reports"]
    assert (baseline["role"], candidate["role"]) == ("baseline", "candidate")
    return baseline, candidate


def by_id(report: dict) -> dict[str, dict]:
    return {r["id"]: r for r in report["results"]}


def compare(out: Path, baseline: str, candidate: str, *only: str, extra: tuple[str, ...] = ()):
    args = ["compare", "--baseline-python", baseline, "--candidate-python", candidate, "--device", "cpu",
            "--threads", "1", "--out", str(out), *extra]
    for o in only:
        args += ["--only", o]
    return run_cli(*args)


@pytest.mark.serial  # its verdict is a timing: run alone, after the parallel phase
def test_same_torch_on_both_sides_passes(tmp_path: Path, torch_python: str) -> None:
    proc = compare(tmp_path, torch_python, torch_python, "mlp[float32]/numerics", "matmul[float32]/*")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    baseline, candidate = load(tmp_path)
    cand = by_id(candidate)
    cv = cand["mlp[float32]/cross-version"]
    assert cv["outcome"] == "passed" and cv["metrics"]["bitwise_equal_to_baseline"] is True
    lat = cand["matmul[float32]/latency"]
    assert lat["outcome"] != "failed" and lat["metrics"]["change"] in ("unchanged", "undecided", "improved")
    assert len(lat["metrics"]["baseline_samples_ms"]) >= 24 and 0.5 < lat["metrics"]["ratio"] < 2
    assert lat["metrics"]["batches"] >= 1 and lat["metrics"]["inner_loops"] >= 1  # fresh pairs, one loop count
    assert by_id(baseline)["matmul[float32]/latency"]["metrics"]["samples_ms"] == lat["metrics"]["baseline_samples_ms"]
    mem = cand["matmul[float32]/memory"]
    assert mem["outcome"] == "passed" and mem["metrics"]["change"] == "unchanged"
    junit = (tmp_path / "junit.xml").read_text()
    assert junit.count("<testsuite ") == 2
    assert "What changed" in (tmp_path / "summary.md").read_text()


@pytest.mark.fast  # in the fast tier: one of the few e2e tests that together run every module
def test_numeric_drift_fails_cross_version_and_names_the_module(tmp_path: Path, torch_python: str) -> None:
    drifting = injected_python(torch_python, tmp_path / "drift", drift=1e-3)
    proc = compare(tmp_path / "out", torch_python, str(drifting), "mlp[float32]/numerics")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr
    _, candidate = load(tmp_path / "out")
    cv = by_id(candidate)["mlp[float32]/cross-version"]
    assert cv["outcome"] == "failed"
    assert cv["metrics"]["first_divergent_module"]["module"] == "0"  # the first Linear of the Sequential
    assert "first divergent module: 0" in cv["reason"] and "× the baseline's" in cv["reason"]
    # the drift is Python code around the Linear's addmm: no kernel changed, the ops it calls did
    assert cv["reason"].startswith("no aten op's kernel changed on the baseline's inputs"), cv["reason"]
    assert "the baseline called aten.gelu.default in 1, the candidate aten.mul.Tensor in 0" in cv["reason"], cv["reason"]


def test_candidate_compares_with_this_runs_baseline_even_when_it_saves_late(tmp_path: Path, torch_python: str) -> None:
    """The candidate's worker waits for the baseline's saved outputs (it would otherwise skip its
    cross-version checks when the baseline is slow), and never compares with an earlier run's."""
    out = tmp_path / "out"
    drifting = injected_python(torch_python, tmp_path / "drift", drift=1e-3)
    first = compare(out, str(drifting), torch_python, "mlp[float32]/numerics")
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr  # the candidate is nearer the fp64 golden
    assert by_id(load(out)[1])["mlp[float32]/cross-version"]["metrics"]["bitwise_equal_to_baseline"] is False
    late = tmp_path / "late-python"  # every start of the baseline takes 15 s more: it saves long after the candidate is ready
    late.write_text(f'#!/bin/sh\nsleep 15\nexec "{torch_python}" "$@"\n')
    late.chmod(0o755)
    proc = compare(out, str(late), torch_python, "mlp[float32]/numerics")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    cv = by_id(load(out)[1])["mlp[float32]/cross-version"]
    assert cv["outcome"] == "passed" and cv["metrics"]["bitwise_equal_to_baseline"] is True, cv
    assert cv["duration_s"] < 15  # waiting for the baseline is not the check's time (nor its --timeout)


@pytest.mark.serial  # its verdict is a timing: run alone, after the parallel phase
def test_injected_slowdown_is_a_confirmed_regression_and_fail_on_decides(tmp_path: Path, torch_python: str) -> None:
    slow = injected_python(torch_python, tmp_path / "slow", slowdown=2.0)
    proc = compare(tmp_path / "a", torch_python, str(slow), "matmul[float32]/latency")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr
    _, candidate = load(tmp_path / "a")
    lat = by_id(candidate)["matmul[float32]/latency"]
    assert lat["outcome"] == "failed" and lat["metrics"]["change"] == "regression" and lat["metrics"]["confirmed"]
    assert lat["metrics"]["batches"] >= 4 and lat["metrics"]["agreeing_batches"] >= 4  # four fresh pairs agree
    assert lat["metrics"]["ratio"] > 2
    proc = compare(tmp_path / "b", torch_python, str(slow), "matmul[float32]/latency",
                   extra=("--fail-on", "correctness"))
    assert proc.returncode == 0 and "--fail-on lets it pass" in proc.stdout


def user_model(width: int, batch: int) -> str:
    """A team's model as a factory module: three Linear(width, width) + GELU layers on a (batch, width) input."""
    return f"""
import torch


def build():
    layers = []
    for _ in range(3):
        layers += [torch.nn.Linear({width}, {width}), torch.nn.GELU()]
    return torch.nn.Sequential(*layers), (torch.randn({batch}, {width}),)
"""


def batch_for(torch_python: str, width: int, target_ms: float) -> int:
    """The batch at which `user_model(width, batch)` takes about `target_ms` a forward on one thread of this machine
    (a worker's latency side runs on one): 320 was 500 ms on the 2-core development machine and 215 ms on CI's. Timed
    at batch 64 (the median of 5 forwards after 2 warm-ups); a forward's cost is linear in the batch."""
    probe = f"""
import time, torch
torch.set_num_threads(1)
exec({user_model(width, 64)!r})
model, (x,) = build()
times = []
with torch.no_grad():
    for i in range(7):
        t = time.perf_counter(); model(x); times.append(time.perf_counter() - t)
print(sorted(times[2:])[2] * 1000)
"""
    proc = subprocess.run([torch_python, "-c", probe], check=False, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return max(64, min(4096, round(64 * target_ms / float(proc.stdout.strip()))))


USER_CONFIG = """version: 1
suite: none
python-path: [.]
workloads:
  - name: user_mlp
    factory: user_model:build
    aspects: [latency]
"""


def slowed_2x_and_aa(tmp_path: Path, torch_python: str, model: str) -> tuple[dict, dict]:
    """The candidate's latency result of `model` slowed 2x (compare fails) and of its A/A (compare passes). Both sides
    are wrapped (inject.py), so the wrapper's cost cancels."""
    (tmp_path / "user_model.py").write_text(model)
    (tmp_path / "tuc.yml").write_text(USER_CONFIG)
    base = injected_python(torch_python, tmp_path / "base", slowdown=0.0)
    slow = injected_python(torch_python, tmp_path / "slow", slowdown=1.0)  # every forward takes twice as long
    config = ("--config", str(tmp_path / "tuc.yml"))
    proc = compare(tmp_path / "2x", str(base), str(slow), extra=config)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr
    proc_aa = compare(tmp_path / "aa", str(base), str(base), extra=config)
    assert proc_aa.returncode == 0, proc_aa.stdout[-3000:] + proc_aa.stderr
    slowed, same = (by_id(load(tmp_path / side)[1])["user_mlp[float32]/latency"] for side in ("2x", "aa"))
    return slowed, same


@pytest.mark.serial  # its verdict is a timing: run alone, after the parallel phase
def test_a_real_size_model_slowed_2x_fails_within_the_default_budget_and_its_aa_passes(tmp_path: Path,
                                                                                       torch_python: str) -> None:
    """Issue 18: on a ~100 ms forward (one thread of the quiet 2-core machine) one pair of 24 rounds used to spend the
    whole 20 s budget, and a doubled latency was `suspicious`, exit 0."""
    lat, aa = slowed_2x_and_aa(tmp_path, torch_python, user_model(2048, 256))
    m = lat["metrics"]
    # measured 2.0-2.1x on a quiet machine; a busy one shrinks the busy-wait injection's share (1.6x seen)
    assert lat["outcome"] == "failed" and m["change"] in ("regression", "undecided") and m["ratio"] > 1.3, lat["reason"]
    # 20 s on the quiet machine (32 rounds and 4 warm-ups of a 100 ms forward fit in it); a loaded machine's slower
    # forwards size it up (measure.LATENCY_BUDGET_ROUNDS)
    assert 20 <= m["budget_s"] <= 200 and sum(m["batch_seconds"]) <= 1.25 * m["budget_s"], m["batch_seconds"]
    assert m["inner_loops"] == 1  # a sample is one forward: no extra calls besides the warm-up round
    assert aa["outcome"] != "failed" and aa["metrics"]["change"] != "regression"


@pytest.mark.serial  # its verdict is a timing: run alone, after the parallel phase
def test_a_half_second_forward_slowed_2x_is_a_confirmed_regression_and_its_aa_passes(tmp_path: Path,
                                                                                       torch_python: str) -> None:
    """Issue 37: from about 0.35 s a forward no second pair fitted the fixed 20 s budget (the first pair's warm-up
    alone is 5 forwards a side) and a failure needs 4 pairs, so a doubled forward ended `undecided` after one pair
    (`suspicious`, exit 0). Its budget is now what 32 of its rounds and 4 warm-ups cost (measured by its first pair),
    up to 10x --ab-budget: 4 pairs fit and confirm it. The model is sized to about 550 ms a forward on the machine that
    runs the test (5x the above)."""
    lat, aa = slowed_2x_and_aa(tmp_path, torch_python, user_model(4096, batch_for(torch_python, 4096, 550.0)))
    m = lat["metrics"]
    baseline_ms = sorted(m["baseline_samples_ms"])[len(m["baseline_samples_ms"]) // 2]
    assert baseline_ms > 300, m["baseline_samples_ms"]  # the heavy regime the issue is about (from about 0.35 s)
    assert lat["outcome"] == "failed" and m["change"] == "regression" and m["batches"] >= 4, lat["reason"]
    assert 20 < m["budget_s"] <= 200 and sum(m["batch_seconds"]) <= 1.25 * m["budget_s"], (m["budget_s"],
                                                                                          m["batch_seconds"])
    assert aa["outcome"] in ("passed", "suspicious") and aa["metrics"]["change"] in ("unchanged", "undecided"), aa["reason"]


@pytest.mark.serial  # its verdict is a timing: run alone, after the parallel phase
def test_an_undecided_slowdown_fails_unless_the_config_says_pass(tmp_path: Path, torch_python: str) -> None:
    """A budget too small for the four pairs a regression needs, even at the 10 times of it a latency check may be
    sized to (0.1 s here, where matmul's first pair alone takes more): `undecided`, with what deciding would cost;
    its estimate is beyond the threshold, so it fails by default and passes (warning) under `undecided: pass`."""
    slow = injected_python(torch_python, tmp_path / "slow", slowdown=2.0)
    proc = compare(tmp_path / "a", torch_python, str(slow), "matmul[float32]/latency", extra=("--ab-budget", "0.01"))
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr
    lat = by_id(load(tmp_path / "a")[1])["matmul[float32]/latency"]
    assert (lat["outcome"], lat["metrics"]["change"], lat["metrics"]["batches"]) == ("failed", "undecided", 1)
    assert lat["reason"].startswith("undecided: latency ") and "deciding would take about 3 more process pairs" in lat["reason"]
    assert "undecided" in (tmp_path / "a" / "summary.md").read_text()
    (tmp_path / "cfg.yml").write_text("version: 1\nundecided: pass\n")
    proc = compare(tmp_path / "b", torch_python, str(slow), "matmul[float32]/latency",
                   extra=("--ab-budget", "0.01", "--config", str(tmp_path / "cfg.yml")))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    lat = by_id(load(tmp_path / "b")[1])["matmul[float32]/latency"]
    assert (lat["outcome"], lat["metrics"]["change"]) == ("suspicious", "undecided")
    assert "undecided (warns, does not fail): undecided: latency" in (tmp_path / "b" / "junit.xml").read_text()


def test_zero_tolerances_fail_a_drift_that_default_tolerances_let_pass(tmp_path: Path, torch_python: str) -> None:
    # rtol = atol = 0 compares with the baseline bitwise: a drift of 1e-7 (far inside float32's default
    # tolerance) must fail cross-version, while the same torch passes (tests/action: the act run)
    drifting = injected_python(torch_python, tmp_path / "drift", drift=1e-7)
    loose = compare(tmp_path / "loose", torch_python, str(drifting), "mlp[float32]/cross-version")
    assert loose.returncode == 0, loose.stdout[-3000:] + loose.stderr
    strict = compare(tmp_path / "strict", torch_python, str(drifting), "mlp[float32]/cross-version",
                     extra=("--rtol", "0", "--atol", "0"))
    assert strict.returncode == 1, strict.stdout[-3000:] + strict.stderr
    result = by_id(load(tmp_path / "strict")[1])["mlp[float32]/cross-version"]
    assert result["outcome"] == "failed" and "bitwise" in result["reason"], result
    assert result["metrics"]["bitwise_equal_to_baseline"] is False


def test_user_pytest_runs_under_both_versions(tmp_path: Path, torch_python: str) -> None:
    example = ROOT / "examples" / "tiny_project"
    proc = run_cli("compare", "--baseline-python", torch_python, "--candidate-python", torch_python,
                   "--device", "cpu", "--only", "pytest", "--out", str(tmp_path), cwd=example)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    baseline, candidate = load(tmp_path)
    for report in (baseline, candidate):
        tests = [r for r in report["results"] if r["aspect"] == "pytest"]
        assert len(tests) == 3 and all(r["outcome"] == "passed" for r in tests)


@pytest.mark.parametrize(("args", "code", "message"), [
    (["--candidate", "banana"], 2, "--candidate must be a torch version like 2.13.0"),
    (["--candidate", "2.13.0", "--torch-backend", "cuda12"], 2, "--torch-backend must be auto, pypi, cpu"),
    (["--baseline", "2.13.0"], 2, "compare needs --candidate SPEC"),
    (["--candidate", "2.13.0", "--max-latency-regression", "ten"], 2,
     "--max-latency-regression must be a percentage like 10% or a ratio like 0.10, got 'ten'"),
    (["--candidate", "2.13.0", "--venv-cap", "-1"], 2, "--venv-cap must be a positive number of GB like 20, got '-1'"),
    (["--candidate", "2.13.0", "--undecided", "maybe"], 2, "--undecided: invalid choice: 'maybe'"),
])
def test_bad_compare_flags(tmp_path: Path, args: list[str], code: int, message: str) -> None:
    proc = run_cli("compare", *args, "--out", str(tmp_path))
    assert proc.returncode == code
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_interpreter_without_torch_is_infrastructure(tmp_path: Path, torch_python: str) -> None:
    venv.create(tmp_path / "bare", with_pip=False)
    proc = compare(tmp_path / "out", torch_python, str(tmp_path / "bare" / "bin" / "python"), "matmul")
    assert proc.returncode == 3
    assert "No module named 'torch'" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_version_that_does_not_exist_is_the_teams_input_naming_the_index(tmp_path: Path) -> None:
    """A torch version the index does not have is the team's input (exit 2, issue 45 item 5), not the runner's: pip is
    asked for torch alone, and its answer named."""
    # --torch-backend pypi: the machine's configured index (a CPU-only machine's `auto` asks PyTorch's CPU index)
    proc = run_cli("compare", "--candidate", "2.99.0", "--installer", "pip", "--torch-backend", "pypi",
                   "--venv-dir", str(tmp_path / "venvs"), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    # pip's own words: no such release, or (where pip is capped by a constraint) the conflict
    assert ("No matching distribution found for torch==2.99.0" in proc.stderr
            or "Cannot install torch==2.99.0" in proc.stderr), proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("torch-upgrade-check: error: the candidate's torch 2.99.0 is not on "), line
    assert "pass a torch version that index has" in line
    assert "Traceback" not in proc.stderr
    assert not any((tmp_path / "venvs").glob("torch-2.99.0-*"))  # a failed environment is deleted


@pytest.fixture(scope="session")
def venv_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("venvs")
    yield path
    shutil.rmtree(path, ignore_errors=True)  # 2.14.1 alone is 5.5 GB; pytest keeps three sessions' tmp


@pytest.mark.slow
def test_real_upgrade_2_13_to_2_14_with_provisioned_venvs(tmp_path: Path, venv_dir: Path) -> None:
    """The real pair: both torch versions installed by the tool itself (2.14.1 is 5.5 GB; built once)."""
    args = ["compare", "--baseline", "2.13.0", "--candidate", "2.14.1", "--installer", "pip", "--torch-backend", "pypi",
            "--venv-dir", str(venv_dir), "--device", "cpu", "--threads", "1",
            "--only", "matmul[float32]/*", "--only", "mlp[float32]/numerics"]
    proc = run_cli(*args, "--out", str(tmp_path / "first"))
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr
    assert "installing torch==2.14.1" in proc.stdout and "candidate: torch 2.14.1" in proc.stdout
    assert "baseline: torch 2.13.0+cpu installed in" in proc.stdout
    baseline, candidate = load(tmp_path / "first")
    assert baseline["environment"]["torch_version"].startswith("2.13.0")
    assert candidate["environment"]["torch_version"].startswith("2.14.1")
    cand = by_id(candidate)
    assert cand["mlp[float32]/cross-version"]["metrics"]["baseline_torch"].startswith("2.13.0")
    assert cand["mlp[float32]/cross-version"]["outcome"] == "passed"
    assert "matmul[float32]/latency" in cand and "ratio" in cand["matmul[float32]/latency"]["metrics"]
    assert "2.13.0" in (tmp_path / "first" / "summary.md").read_text()
    again = run_cli(*args, "--out", str(tmp_path / "second"))
    assert "baseline: torch 2.13.0+cpu reused from" in again.stdout and "installing" not in again.stdout
    assert again.stdout.count(" reused from ") == 2
