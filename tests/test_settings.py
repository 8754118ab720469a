"""Each command's settings are built once from its flags, frozen, and hold every flag its parser defines (no torch)."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import pytest

from torch_upgrade_check import cli
from torch_upgrade_check.commands import settings


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    (sub,) = (a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_every_flag_of_each_command_is_a_field_of_its_settings() -> None:
    """settings.as_typed fills a field from the flag of the same dest: a flag without a field would be lost."""
    parsers = _subparsers()
    assert set(parsers) == set(settings.SETTINGS)
    for command, parser in parsers.items():
        dests = {a.dest for a in parser._actions} - {"help"}
        fields = {f.name for f in dataclasses.fields(settings.SETTINGS[command])}
        assert dests - fields == set(), command


def test_compare_extends_run_and_the_settings_are_frozen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no ./torch-upgrade-check.yml is read
    argv = ["compare", "--candidate", "current", "--rtol", "1e-4", "--only", "mlp*", "--max-latency-ms", "mlp=9"]
    s = settings.build(cli.build_parser().parse_args(argv), argv)
    assert isinstance(s, settings.RunSettings) and isinstance(s, settings.Install)
    assert (s.rtol, s.only, s.max_latency_ms) == ("1e-4", ("mlp*",), ("mlp=9",))  # as typed, for a repro
    assert s.session.params == {"rtol": 1e-4} and s.session.max_latency_ms == {"mlp": 9.0}  # what they mean
    assert s.session.command == ("torch-upgrade-check", *argv) and not s.has_baseline
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.rtol = "0"  # type: ignore[misc]
