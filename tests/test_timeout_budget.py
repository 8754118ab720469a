"""Per-check timeouts sized from the workload's forward (issue 46 item 8): a slow model is given the time its checks
need, a hang is still stopped, and the run says at its start which checks may not fit and what to set."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from conftest import FIXTURES, load_report, results_by_id, run_cli
from harness import interpreter

from torch_upgrade_check.aspects import ASPECT, TABLE, Runs
from torch_upgrade_check.model import CheckSpec, Outcome, Report, Status
from torch_upgrade_check.orchestrate import budget
from torch_upgrade_check.orchestrate.budget import Budget, Pace
from torch_upgrade_check.orchestrate.workers import run_worker
from torch_upgrade_check.report.summary import render_summary

SLOW_S = 0.6  # tests/fixtures/faulty.py's forward
LOW = Budget(base_s=1.0, cap_s=60.0, pace_s=60.0)  # today's 300 s floor scaled down: the tests take seconds


def spec(factory: str, aspect: str = "determinism", workload: str = "slow") -> CheckSpec:
    return CheckSpec(workload, aspect, "cpu", "float32", factory)


# --- the sizing itself (pure) ---------------------------------------------------------------------------------------

def test_a_slower_forward_gets_a_longer_timeout_between_the_floor_and_the_cap() -> None:
    b = Budget()
    assert b.timeout("numerics", None) == b.timeout("numerics", Pace(None)) == budget.BASE_S  # nothing timed
    assert b.timeout("numerics", Pace(0.001, 8)) == budget.BASE_S  # a small model keeps the floor
    assert b.timeout("numerics", Pace(10.0, 8)) == pytest.approx(500.0)  # 50 forwards of 10 s
    assert b.timeout("numerics", Pace(100.0, 8)) == budget.CAP_S
    # a compile grows with the forward's ops, not its time: mobilenet_v3_small's ~250 ops pass the old 300 s
    assert b.timeout("compile", Pace(0.001, 8)) == budget.BASE_S
    assert b.timeout("compile", Pace(0.02, 250)) == pytest.approx(50 * 0.02 + budget.COMPILE_S + budget.OP_S * 250)
    assert b.timeout("compile", Pace(0.02, 250)) > budget.BASE_S
    assert b.timeout("dataloader", Pace(10.0, 8)) == budget.BASE_S  # not sized by the model's forward


def test_a_timeout_the_team_gives_always_wins() -> None:
    fixed = Budget(fixed_s=42.0)
    assert not fixed.sized
    for pace in (None, Pace(0.001, 8), Pace(100.0, 5000)):
        assert fixed.timeout("compile", pace) == 42.0


def test_every_aspect_a_worker_runs_on_the_model_is_sized_and_host_checks_are_not() -> None:
    for a in TABLE:
        if a.runs is Runs.HOST or a.cost is None or a.name in ("dataloader", "artifact"):
            assert a.forwards == a.compiles == 0, a.name
        else:
            assert a.forwards > 0, a.name
    assert all(ASPECT[a].compiles > 0 for a in ("compile", "compile-mode", "compile-time", "compile-cache", "aoti"))


def test_a_check_expected_to_outlive_its_timeout_is_named_with_the_setting() -> None:
    specs = [spec("m:f", "numerics", "big"), spec("m:f", "compile", "big"), spec("m:f", "numerics", "small")]
    paces = {"big": Pace(0.5, 2000), "small": Pace(0.001, 8)}
    unfit = budget.unfit(Budget(), specs, paces)
    assert [u.check for u in unfit] == ["big[float32]/compile"]  # 50 × 0.5 s + 30 s + 2000 × 3 s: past the cap
    line = unfit[0].line()
    assert line.startswith("big[float32]/compile: about 6055 s expected (its workload's forward 500 ms, 2000 aten ops), "
                           "over its 1800 s timeout; set --timeout 6100 (the action's input and the config's key "
                           "check-timeout-seconds)"), line
    # a --timeout the team set is judged alike: it wins, and the run says what it leaves out
    assert [u.check for u in budget.unfit(Budget(fixed_s=20.0), specs, paces)] == ["big[float32]/numerics",
                                                                                    "big[float32]/compile"]
    assert budget.to_pace([*specs, spec("m:f", "dataloader", "data")]) == [specs[0], specs[2]]  # one a workload


def test_the_summary_names_the_checks_that_may_not_fit() -> None:
    line = "big[float32]/compile: about 6055 s expected (…); set --timeout 6100 (the action's input …)"
    report = Report(tool_version="1", device="cpu", requested_device="cpu", label="2.13.0", command=[], started="",
                    complete=True, thresholds={"over_budget": [line]})
    text = render_summary([report]).replace("\\", "")
    assert "What needs attention" in text and "1 check may not finish within the per-check timeout" in text
    assert "big[float32]/compile: about 6055 s expected" in text and "set --timeout 6100" in text


# --- real workers, a real slow model --------------------------------------------------------------------------------

def test_a_slow_forward_gets_the_time_the_fixed_default_would_not_give(tmp_path: Path, torch_python: str) -> None:
    """Two training steps of a 0.6 s forward: past a fixed 1 s, within 20 forwards of the 0.6 s the worker timed."""
    slow = spec("faulty:slow_forward")
    fixed = run_worker(torch_python, [slow], log_dir=tmp_path / "fixed", timeout_s=LOW.base_s, threads=1,
                       python_path=[str(FIXTURES)])
    assert fixed.observations[slow.id].status == Status.TIMEOUT, fixed.observations[slow.id]
    paced: list[tuple[str, Pace, int]] = []
    sized = run_worker(torch_python, [slow], log_dir=tmp_path / "sized", timeout_s=LOW.base_s, threads=1,
                       python_path=[str(FIXTURES)], budget=LOW,
                       on_paced=lambda s, w: paced.append((w, s.paces[w], len(s.observations))))
    obs = sized.observations[slow.id]
    assert obs.status == Status.OK and obs.metrics.get("equal") is not False, obs
    (workload, pace, done_before), = paced  # heard once, before the check ended
    assert workload == "slow" and done_before == 0 and SLOW_S <= pace.forward_s < SLOW_S + 1.0 and pace.ops
    assert LOW.timeout("determinism", pace) == pytest.approx(20 * pace.forward_s)


def test_a_hang_still_times_out_at_the_sized_timeout(tmp_path: Path, torch_python: str) -> None:
    hang = spec("faulty:slow_then_hang")
    started = time.monotonic()
    session = run_worker(torch_python, [hang], log_dir=tmp_path, timeout_s=LOW.base_s, threads=1,
                         python_path=[str(FIXTURES)], budget=LOW)
    obs = session.observations[hang.id]
    limit = LOW.timeout("determinism", session.paces["slow"])
    assert obs.status == Status.TIMEOUT and limit < LOW.cap_s, obs
    assert obs.message.startswith(f"timed out after {limit:g}s (the per-check timeout, sized from slow's forward")
    assert "--timeout SECONDS sets it" in obs.message
    assert limit <= obs.duration_s < limit + 30 and time.monotonic() - started < 120


def test_a_hang_while_timing_the_forward_is_bounded_and_the_checks_still_run(tmp_path: Path,
                                                                             torch_python: str) -> None:
    """faulty:hang never returns from its factory: the forward's timing is given up, a fresh worker runs the checks
    (the next workload's timed before its own), and the hung one's check times out at the floor."""
    hung, good = spec("faulty:hang", "numerics", "hung"), spec("faulty:good", "numerics", "good")
    paced: list[tuple[str, Pace]] = []
    session = run_worker(torch_python, [hung, good], log_dir=tmp_path, timeout_s=1.0, threads=1,
                         python_path=[str(FIXTURES)], budget=Budget(base_s=1.0, cap_s=60.0, pace_s=15.0),
                         on_paced=lambda s, w: paced.append((w, s.paces[w])))
    assert [w for w, _ in paced] == ["hung", "good"] and paced[0][1].forward_s is None and paced[1][1].forward_s
    assert "was not built and run within 15s" in session.said["hung"]["error"]
    assert session.observations[hung.id].status == Status.TIMEOUT
    assert session.observations[hung.id].message.startswith("timed out after 1s")
    assert session.observations[good.id].status == Status.OK


def test_the_run_says_at_its_start_which_checks_may_not_fit_and_what_to_set(tmp_path: Path,
                                                                            torch_python: str) -> None:
    proc = run_cli("run", "--python", torch_python, "--device", "cpu", "--out", str(tmp_path), "--timeout", "10",
                   "--threads", "1", "--python-path", str(FIXTURES), "--workload", "slow=faulty:slow_forward",
                   "--only", "slow[float32]/determinism", timeout=300)
    out = proc.stdout + proc.stderr
    said = next((line for line in out.splitlines() if "may not fit its budget" in line), "")
    # 20 forwards of at least 0.6 s: past the 10 s the team set
    assert re.search(r"slow\[float32\]/determinism: about \d+ s expected \(its workload's forward [\d.]+ m?s, \d+ aten "
                     r"ops\), over its 10 s timeout; set --timeout \d+00 \(the action's input and the config's key "
                     r"check-timeout-seconds\)",
                     said), out
    assert out.index("may not fit its budget") < out.index("slow[float32]/determinism ")  # before the check's line
    report = load_report(tmp_path)
    assert report["thresholds"]["over_budget"] == [said.split("may not fit its budget: ", 1)[1]]
    assert report["thresholds"]["paces"]["slow"]["forward_s"] >= SLOW_S
    assert report["thresholds"]["check_timeouts_s"] == {}  # --timeout won: nothing sized
    assert results_by_id(report)["slow[float32]/determinism"]["outcome"] in (Outcome.PASSED.value, Outcome.ERROR.value)
    summary = (tmp_path / "summary.md").read_text(encoding="utf-8").replace("\\", "")
    assert "may not finish within the per-check timeout: slow[float32]/determinism" in summary


def test_compares_ab_requests_take_the_timeout_sized_from_the_slower_sides_pace(tmp_path: Path) -> None:
    from torch_upgrade_check.commands.compare import _sized_timeouts
    from torch_upgrade_check.orchestrate.session import Settings

    def side(paces: dict) -> Report:
        return Report(tool_version="1", device="cpu", requested_device="cpu", label="", command=[], started="",
                      thresholds={"paces": paces})

    reports = {"baseline": side({"big": {"forward_s": 2.0, "ops": None}, "odd": {"forward_s": "x", "ops": 3}}),
               "candidate": side({"big": {"forward_s": 4.0, "ops": 900}})}
    latency, compiled = spec("m:f", "latency", "big"), spec("m:f", "compiled-latency", "big")
    sized = _sized_timeouts(Settings(out=tmp_path, size_timeouts=True), reports)
    assert sized(latency) == pytest.approx(100 * 4.0)  # the candidate's slower forward
    assert sized(compiled) == pytest.approx(min(budget.CAP_S, 100 * 4.0 + 0.5 * (budget.COMPILE_S + budget.OP_S * 900)))
    assert sized(spec("m:f", "latency", "odd")) == sized(spec("m:f", "latency", "unseen")) == budget.BASE_S
    assert _sized_timeouts(Settings(out=tmp_path, timeout_s=20.0), reports)(compiled) == 20.0  # --timeout wins


def test_the_forward_is_timed_with_the_device_synchronised_under_the_cuda_emulation(tmp_path: Path,
                                                                                     torch_python: str) -> None:
    """The emulated CUDA's kernels pay their device time (50 ms each here) only at synchronize, as a GPU's: a forward
    timed without it would read the launches alone. On a real GPU this is unproven (none was lent)."""
    python = interpreter(torch_python, tmp_path / "py", emulate="cuda", options={"TUC_EMULATE_KERNEL_US": "50000"})
    good = CheckSpec("good", "numerics", "cuda", "float32", "faulty:good")
    paced: list[Pace] = []
    session = run_worker(str(python), [good], log_dir=tmp_path / "logs", timeout_s=60.0, threads=1,
                         python_path=[str(FIXTURES)], budget=LOW, on_paced=lambda s, w: paced.append(s.paces[w]))
    assert session.observations[good.id].status == Status.OK, session.observations[good.id]
    (pace,) = paced
    assert pace.forward_s is not None and pace.forward_s >= 3 * 0.05, (pace, session.said)  # Linear, Tanh, Linear


@pytest.mark.parametrize("argv, config, sized, seconds", [
    ([], "", True, budget.BASE_S),  # nothing set: sized, the floor as its base
    ([], "check-timeout-seconds: 900\n", False, 900.0),  # the config's key holds for every check
    (["--timeout", "60"], "check-timeout-seconds: 900\n", False, 60.0),  # --timeout overrides it
])
def test_a_timeout_set_by_flag_or_config_key_turns_the_sizing_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   argv: list[str], config: str, sized: bool,
                                                                   seconds: float) -> None:
    from torch_upgrade_check import cli
    from torch_upgrade_check.commands import settings

    monkeypatch.chdir(tmp_path)
    if config:
        (tmp_path / "torch-upgrade-check.yml").write_text("version: 1\n" + config, encoding="utf-8")
    args = ["run", *argv, *(["--config", str(tmp_path / "torch-upgrade-check.yml")] if config else [])]
    s = settings.build(cli.build_parser().parse_args(args), args).session
    assert (s.size_timeouts, s.timeout_s) == (sized, seconds)
    assert s.budget().sized is sized and s.budget().timeout("compile", Pace(1.0, 2000)) == (
        budget.CAP_S if sized else seconds)
