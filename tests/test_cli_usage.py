"""Bad flags: one line per problem, exit 2, no traceback, before any worker starts."""

from __future__ import annotations

import pytest

from torch_upgrade_check.cli import main


@pytest.mark.parametrize(("argv", "message"), [
    (["run", "--device", "tpu"], "argument --device: invalid choice: 'tpu'"),
    (["run", "--rtol", "-1"], "--rtol must be a number ≥ 0 like 1e-4 (0 turns that part of the tolerance off), got '-1'"),
    (["run", "--timeout", "0"], "--timeout must be a positive number like 600 (seconds per check), got '0'"),
    (["run", "--max-latency-ms", "mlp"], "--max-latency-ms must be NAME=MS"),
    (["run", "--max-latency-ms", "mlp=ten"], "got 'mlp=ten'"),
    (["run", "--workload", "x=nocolon"], "--workload must be NAME=MODULE:FUNCTION"),
    (["run", "--workload", "mlp=a:b"], "--workload name 'mlp' is already taken"),
    (["run", "--threads", "0"], "--threads must be 1 or more"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
    (["report", "/nonexistent/report.json"], "cannot read report /nonexistent/report.json"),
])
def test_usage_errors(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1 and err.startswith("torch-upgrade-check: error: ")


def test_all_problems_are_reported_together(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--rtol", "-1", "--atol", "nan", "--max-latency-ms", "x"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3
