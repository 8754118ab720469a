"""values.py: each kind of value has one rule, and the CLI, the action and the config file all apply it."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import pytest

from torch_upgrade_check import cli, values
from torch_upgrade_check.action import argv as action_argv
from torch_upgrade_check.action import inputs as action_inputs
from torch_upgrade_check.commands import settings
from torch_upgrade_check.configfile.read import load_config
from torch_upgrade_check.errors import UsageError

TOLERANCE = "must be a number ≥ 0 like 1e-4 (0 turns that part of the tolerance off)"
PERCENT = "must be a percentage like 10% or a ratio like 0.10"
TIMEOUT = "must be a positive number like 600 (seconds per check)"
LATENCY = "must be NAME=MS with MS a positive number of milliseconds, like mlp=25"

# (parser, value, what it parses to); every value is given as text, as flags and inputs are, unless a number.
ACCEPTED: list[tuple[Callable[..., object], object, object]] = [
    (values.tolerance, "0", 0.0), (values.tolerance, "-0", 0.0), (values.tolerance, "1e-4", 1e-4),
    (values.tolerance, " 0.5 ", 0.5), (values.tolerance, 0, 0.0), (values.tolerance, 2, 2.0),
    (values.percent, "10%", 0.10), (values.percent, " 12.5 % ", 0.125), (values.percent, "0%", 0.0),
    (values.percent, "150%", 1.5), (values.percent, 0.1, 0.1), (values.percent, "0.25", 0.25),
    (values.percent, 0, 0.0), (values.percent, 1, 1.0),
    (values.timeout, "600", 600.0), (values.timeout, "0.5", 0.5), (values.timeout, 30, 30.0),
    (values.milliseconds, "25", 25.0), (values.milliseconds, 0.1, 0.1),
    (values.latency_limit, "mlp=25", ("mlp", 25.0)), (values.latency_limit, " flex* = 4.5 ", ("flex*", 4.5)),
    (values.threads, "1", 1), (values.threads, "16", 16), (values.threads, 4, 4),
]

# (parser, value, the message's text after the key)
REFUSED: list[tuple[Callable[..., object], object, str]] = [
    *[(values.tolerance, v, f"{TOLERANCE}, got {v!r}")
      for v in ("-1", "-1e-9", "nan", "inf", "-inf", "abc", "", "1e-4%", -0.5, math.nan, math.inf, True, None, [0])],
    *[(values.percent, v, f"{PERCENT}, got {v!r}")
      for v in ("ten%", "-5%", "%", "", "nan%", "inf", True, None, [10], "10 percent")],
    (values.percent, 1.5, f"{PERCENT}, got 1.5 (a ratio above 1 is ambiguous: write 1.5% for 1.5 percent)"),
    *[(values.timeout, v, f"{TIMEOUT}, got {v!r}") for v in ("0", "-1", "nan", "inf", "soon", 0, False)],
    *[(values.milliseconds, v, f"must be a positive number like 25, got {v!r}") for v in ("0", "-3", "nan", "inf", "x")],
    *[(values.latency_limit, v, f"{LATENCY}, got {v!r}")
      for v in ("mlp", "mlp=", "=25", " =25", "mlp=0", "mlp=-1", "mlp=nan", "mlp=inf", "mlp=ten")],
    *[(values.threads, v, f"must be 1 or more (a whole number like 4), got {v!r}")
      for v in ("0", "-2", "1.5", "four", "inf", "nan", "", True)],
]


@pytest.mark.parametrize(("parse", "value", "parsed"), ACCEPTED)
def test_accepted(parse: Callable[..., object], value: object, parsed: object) -> None:
    assert parse(value, "--x") == parsed


@pytest.mark.parametrize(("parse", "value", "message"), REFUSED)
def test_refused_with_one_line_naming_the_key_and_the_value(parse: Callable[..., object], value: object,
                                                             message: str) -> None:
    with pytest.raises(UsageError) as e:
        parse(value, "--x")
    assert e.value.problems == (f"--x {message}",)
    assert "\n" not in e.value.problems[0]


def test_got_shows_what_the_caller_says() -> None:
    with pytest.raises(UsageError) as e:
        values.tolerance([1], "thresholds.rtol", got="a list")
    assert str(e.value).endswith(", got a list")


def test_collect_keeps_every_problem() -> None:
    problems: list[str] = []
    assert values.collect(problems, values.tolerance, "-1", "--rtol") is None
    assert values.collect(problems, values.timeout, "5", "--timeout") == 5.0
    assert values.collect(problems, values.threads, "0", "--threads") is None
    assert [p.split(" ")[0] for p in problems] == ["--rtol", "--threads"]


# --- the three front ends apply the same rules --------------------------------------------------------------------

def _cli(flag: str, value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """'' when the CLI accepts `--flag value`, else its one problem."""
    monkeypatch.chdir(tmp_path)  # no ./torch-upgrade-check.yml is read
    command = "compare" if "regression" in flag else "run"
    given = f"--{flag}={value}"  # `--rtol -inf` would read as two flags to argparse
    args = cli.build_parser().parse_args([command, "--candidate", "current", given] if command == "compare"
                                         else [command, given])
    try:
        settings.build(args, [])  # compare's: run's flags, then its own
    except UsageError as e:
        (problem,) = e.problems
        return problem
    return ""


def _action(name: str, value: str) -> str:
    inputs = {"baseline-torch-version": "current"} if "regression" in name else {}
    problems = action_argv.plan({action_inputs.env_name(k): v for k, v in {**inputs, name: value}.items()}).problems
    assert len(problems) <= 1, problems
    return problems[0] if problems else ""


def _config(key: str, value: str, tmp_path: Path) -> str:
    """'' when the config file accepts `key: 'value'` (quoted: text, as the other two get it), else its problem."""
    path = tmp_path / "cfg.yml"
    section, _, name = key.partition(".")
    if section == "thresholds":
        path.write_text(f"version: 1\nthresholds:\n  {name}: '{value}'\n")
    else:
        path.write_text(f"version: 1\nworkloads:\n  - name: tiny\n    factory: pkg.m:build\n    {name}: '{value}'\n")
    try:
        load_config(path, explicit=True)
    except UsageError as e:
        (problem,) = e.problems
        line, _, rest = problem.removeprefix(f"{path}:").partition(": ")
        assert line.isdigit(), problem
        return rest
    return ""


# (CLI flag, action input, config key or "", [value, ...]): the CLI and the action get text; so does the config.
FRONT_ENDS = [
    ("rtol", "rtol", "thresholds.rtol", ["0", "0.0", "-0", "1e-4", "1", "-1", "-1e-9", "nan", "inf", "abc", "1e-4%"]),
    ("atol", "atol", "thresholds.atol", ["0", "1e-5", "-1", "NaN", "-inf", "x"]),
    ("rtol", "rtol", "workloads.rtol", ["0", "1e-3", "-1", "inf"]),
    ("atol", "atol", "workloads.atol", ["0", "-0.1", "nan"]),
    ("timeout", "check-timeout-seconds", "", ["600", "0.5", "0", "-1", "nan", "inf", "soon"]),
    ("max-latency-ms", "max-latency-ms", "", ["mlp=25", "flex*=4.5", "mlp", "mlp=0", "=3", "mlp=inf", "mlp=x"]),
    ("max-latency-regression", "max-latency-regression", "thresholds.max-latency-regression",
     ["10%", "0.1", "0", "0%", "150%", "ten", "-5%", "1.5", "nan%", "inf"]),
    ("max-memory-regression", "max-memory-regression", "thresholds.max-memory-regression", ["20%", "2", "x"]),
    ("max-compile-time-regression", "max-compile-time-regression", "thresholds.max-compile-time-regression",
     ["25%", "0.4", "-1%", "soon"]),
]
CASES = [(flag, inp, key, value) for flag, inp, key, vs in FRONT_ENDS for value in vs]


@pytest.mark.parametrize(("flag", "input_name", "config_key", "value"), CASES,
                         ids=[f"{c[2] or c[0]}={c[3]}" for c in CASES])
def test_cli_action_and_config_agree(flag: str, input_name: str, config_key: str, value: str, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """One table through all three front ends: the same values pass, and a refusal reads the same after the key."""
    said = {"cli": _cli(flag, value, tmp_path, monkeypatch), "action": _action(input_name, value)}
    keys = {"cli": f"--{flag}", "action": f"input '{input_name}'"}
    if config_key:
        said["config"] = _config(config_key, value, tmp_path)
        keys["config"] = config_key.replace("workloads.", "workloads[0].")
    if not said["cli"]:
        assert said == dict.fromkeys(said, ""), said
        return
    rules = set()
    for front, problem in said.items():
        assert problem.startswith(keys[front] + " "), (front, problem)
        rules.add(problem.removeprefix(keys[front]))
    assert len(rules) == 1, said
    assert f"got {value!r}" in rules.pop()


# --- zero tolerances, spelled out for each front end -------------------------------------------------------------

def test_cli_accepts_zero_tolerances(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    args = cli.build_parser().parse_args(["run", "--rtol", "0", "--atol", "0"])
    worker = settings.build(args, []).session
    assert worker.params == {"rtol": 0.0, "atol": 0.0}  # both 0: bitwise equality


def test_cli_zero_tolerance_beats_the_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "torch-upgrade-check.yml").write_text(
        "version: 1\nsuite: none\nthresholds: {rtol: 1.0e-3, atol: 1.0e-3}\n"
        "workloads:\n  - {name: tiny, factory: 'pkg.m:build', atol: 1.0e-2}\n")
    worker = settings.build(cli.build_parser().parse_args(["run", "--atol", "0"]), []).session
    assert worker.params_by_workload == {"tiny": {"rtol": 1e-3, "atol": 0.0}}


def test_action_accepts_zero_tolerances() -> None:
    inputs = action_inputs.read_inputs({action_inputs.env_name("rtol"): "0", action_inputs.env_name("atol"): "0"})
    assert action_inputs.validate(inputs) == []
    argv = action_argv.build_argv(inputs)
    assert argv[argv.index("--rtol"):][:4] == ["--rtol", "0", "--atol", "0"]


def test_config_accepts_zero_tolerances_and_keeps_them(tmp_path: Path) -> None:
    path = tmp_path / "cfg.yml"
    path.write_text("version: 1\nthresholds:\n  rtol: 0\n  atol: 0.0\n"
                    "workloads:\n  - name: tiny\n    factory: pkg.m:build\n    rtol: 0\n    atol: 1.0e-6\n")
    cfg = load_config(path, explicit=True)
    assert (cfg.thresholds.rtol, cfg.thresholds.atol) == (0.0, 0.0)
    assert cfg.tolerances_for("tiny") == {"rtol": 0.0, "atol": 1e-6}  # a workload's 0 is a value, not "unset"
    assert cfg.tolerances_for("mlp") == {"rtol": 0.0, "atol": 0.0}


def test_each_regression_flag_sets_its_own_aspects_threshold(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What compare hands the A/B measurement: --max-compile-time-regression 100% is the compile-time threshold
    (ratio 2.0) and leaves the others at their defaults (the judgement at that threshold: test_ab_decisions)."""
    monkeypatch.chdir(tmp_path)
    args = cli.build_parser().parse_args(["compare", "--candidate", "current", "--max-compile-time-regression=100%"])
    thresholds = settings.build(args, []).thresholds
    assert thresholds.by_aspect() == {"latency": 0.10, "compiled-latency": 0.10, "memory": 0.20, "compile-time": 1.0}
