"""The repro command of a check reruns that check as it ran: for `compare`, with both torches as the user gave them."""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from torch_upgrade_check import cli
from torch_upgrade_check.aspects.fleet_memory.judge import JUDGED
from torch_upgrade_check.commands import settings
from torch_upgrade_check.commands.argv import compare_repro, fleet_flags, repro_command
from torch_upgrade_check.commands.common import PROG
from torch_upgrade_check.model import CheckSpec

CROSS = CheckSpec("tiny", "cross-version", "cuda", "float32")
INSTALL = ["--torch-backend", "cu128", "--installer", "pip", "--index-url", "https://download.pytorch.org/whl/cu128",
           "--extra-index-url", "https://a.example/simple", "--find-links", "wheels", "--extra-requirement", "numpy>=2",
           "--venv-dir", "/tmp/venvs"]
SHAPING = ["--workload", "tiny=pkg.models:build", "--workload", "other=pkg.models:other", "--python-path", "src",
           "--config", "cfg.yml", "--rtol", "0", "--atol", "1e-5", "--threads", "2", "--timeout", "900"]


@pytest.fixture(autouse=True)
def _in_a_folder_with_cfg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The settings are validated: SHAPING's --config cfg.yml must exist."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cfg.yml").write_text("version: 1\n")


def _args(*argv: str) -> argparse.Namespace:
    return cli.build_parser().parse_args(list(argv))


def _settings(*argv: str) -> settings.RunSettings:
    return settings.build(_args(*argv), argv)


def repro(s: settings.RunSettings, device: str, spec: CheckSpec) -> str:
    assert isinstance(s, settings.CompareSettings)
    return compare_repro(s, device, spec)


def _parsed(command: str) -> argparse.Namespace:
    """The repro parsed back by the CLI's own parser: it must be a command the CLI accepts."""
    words = shlex.split(command)
    assert words[0] == PROG
    return _args(*words[1:])


def test_cross_version_repro_is_a_compare_with_both_versions_and_every_install_flag() -> None:
    argv = ("compare", "--baseline", "2.12.1", "--candidate", "2.13.0", *INSTALL, *SHAPING, "--device", "auto")
    args = _args(*argv)
    command = repro(_settings(*argv), "cuda", CROSS)
    words = shlex.split(command)
    assert words[:6] == [PROG, "compare", "--baseline", "2.12.1", "--candidate", "2.13.0"]
    again = _parsed(command)
    for name in ("baseline", "candidate", "torch_backend", "installer", "index_url", "extra_index_url", "find_links",
                 "extra_requirement", "venv_dir", "python_path", "config", "rtol", "atol", "threads", "timeout"):
        assert getattr(again, name) == getattr(args, name), name
    assert (again.device, again.only) == ("cuda", ["tiny[float32]/cross-version"])
    assert again.workload == ["tiny=pkg.models:build"]  # only the workload this check runs
    assert again.baseline_python is None and again.candidate_python is None
    assert "--python" not in words  # not given: the default, this interpreter, is not spelled out


def test_prepared_interpreters_are_repeated_as_given_without_install_flags() -> None:
    args = _settings("compare", "--baseline-python", "envs/old/bin/python", "--candidate-python", "/opt/new/bin/python",
                     "--torch-backend", "cu128")
    words = shlex.split(repro(args, "cpu", CROSS))
    assert words[:6] == [PROG, "compare", "--baseline-python", "envs/old/bin/python",
                         "--candidate-python", "/opt/new/bin/python"]
    assert "--torch-backend" not in words and "--baseline" not in words


def test_a_spec_beside_a_prepared_interpreter_keeps_its_install_flags() -> None:
    args = _settings("compare", "--baseline-python", "/opt/old/bin/python", "--candidate", "nightly",
                     "--torch-backend", "cpu", "--python", "python3.12")
    words = shlex.split(repro(args, "cpu", CROSS))
    assert words[2:6] == ["--baseline-python", "/opt/old/bin/python", "--candidate", "nightly"]
    assert shlex.join(words[6:10]) == "--python python3.12 --torch-backend cpu"


def test_candidate_only_compare_repro_is_compare_with_the_candidate() -> None:
    args = _settings("compare", "--candidate", "2.13.0")
    spec = CheckSpec("mlp", "numerics", "cpu", "float32")
    assert repro(args, "cpu", spec) == f"{PROG} compare --candidate 2.13.0 --device cpu --only 'mlp[float32]/numerics'"


def test_latency_and_memory_checks_carry_their_thresholds() -> None:
    args = _settings("compare", "--baseline", "2.12.1", "--candidate", "2.13.0", "--max-latency-regression", "15%",
                     "--max-memory-regression", "0.3", "--max-latency-ms", "mlp=25")
    latency = shlex.split(repro(args, "cpu", CheckSpec("mlp", "latency", "cpu", "float32")))
    memory = shlex.split(repro(args, "cpu", CheckSpec("mlp", "memory", "cpu", "float32")))
    numerics = shlex.split(repro(args, "cpu", CheckSpec("mlp", "numerics", "cpu", "float32")))
    assert shlex.join(latency[-4:]) == "--max-latency-ms mlp=25 --max-latency-regression 15%"
    assert memory[-2:] == ["--max-memory-regression", "0.3"]
    assert not {"--max-latency-ms", "--max-latency-regression", "--max-memory-regression"} & set(numerics)


def test_run_repro_repeats_the_flags_as_typed() -> None:
    args = _settings("run", "--rtol", "1e-4", "--atol", "0", "--threads", "1")
    command = repro_command(args, ["run", "--python", sys.executable], "cpu", CheckSpec("mlp", "numerics", "cpu", "float32"))
    assert command.endswith("--only 'mlp[float32]/numerics' --rtol 1e-4 --atol 0 --threads 1")
    assert _parsed(command).python == sys.executable


def test_compile_times_repro_repeats_compile_time_where_it_was_on() -> None:
    """--only alone plans compile-time on no workload that does not list it: its repro says --compile-time again."""
    spec = CheckSpec("mlp", "compile-time", "cpu", "float32")
    on, off = _settings("compare", "--candidate", "2.13.0", "--compile-time"), _settings("compare", "--candidate", "2.13.0")
    assert repro(on, "cpu", spec) == f"{PROG} compare --candidate 2.13.0 --device cpu --only 'mlp[float32]/compile-time' " \
                                     "--compile-time"
    assert repro(off, "cpu", spec) == f"{PROG} compare --candidate 2.13.0 --device cpu --only 'mlp[float32]/compile-time'"
    assert "--compile-time" not in shlex.split(repro(on, "cpu", CheckSpec("mlp", "compile", "cpu", "float32")))
    assert _parsed(repro(on, "cpu", spec)).compile_time


def test_warnings_repro_repeats_fail_on_as_typed_where_it_names_warnings() -> None:
    """Warnings fail only where --fail-on names them: the repro of a warnings check says so again; of another, not."""
    spec = CheckSpec("mlp", "warnings", "cpu", "float32")
    named = _settings("compare", "--candidate", "2.13.0", "--fail-on", "correctness, warnings")
    assert repro(named, "cpu", spec) == f"{PROG} compare --candidate 2.13.0 --device cpu --only 'mlp[float32]/*' " \
                                        "--fail-on 'correctness, warnings'"
    assert "--fail-on" not in shlex.split(repro(_settings("compare", "--candidate", "2.13.0"), "cpu", spec))
    assert "--fail-on" not in shlex.split(repro(named, "cpu", CheckSpec("mlp", "numerics", "cpu", "float32")))


def test_fleet_memorys_repro_reruns_the_memory_checks_with_the_fleet_as_given() -> None:
    s = _settings("compare", "--candidate", "2.13.0", "--fleet", "memory=24GiB", "--config", "cfg.yml")
    assert fleet_flags(s, JUDGED) == ["--only", "memory", "--config", "cfg.yml", "--fleet", "memory=24GiB"]


def test_ddps_repro_repeats_ddp_and_its_command_lists_the_check() -> None:
    """ddp is opt-in (--ddp): --only alone matches no check, so its repro says --ddp again, and the repro as a user
    pastes it (with --list) finds the check (it stopped with exit 2, "matches no check", before)."""
    spec = CheckSpec("transformer_block", "ddp", "cpu", "float32")
    command = repro_command(_settings("run", "--ddp"), ["run"], "cpu", spec)
    assert command == f"{PROG} run --device cpu --only 'transformer_block[float32]/ddp' --ddp"
    listed = subprocess.run([sys.executable, "-m", "torch_upgrade_check", *shlex.split(command)[1:], "--list"],
                            check=False, capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[0].startswith("transformer_block[float32]/ddp "), listed.stdout
