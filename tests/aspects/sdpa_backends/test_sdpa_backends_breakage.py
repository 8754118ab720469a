"""The sdpa-backends check against a torch broken on purpose (harness: sdpa-flash-odd-lengths, sdpa-default-math):
a kernel wrong only at lengths off its tiles fails it where the default numerics check passes; a default backend that
changed since the baseline is shown, not failed."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness import interpreter
from test_checks_catch_breakage import compared, outcomes

pytestmark = pytest.mark.usefixtures("torch_python")


def test_a_wrong_sdpa_backend_fails_sdpa_backends_where_the_default_numerics_passes(tmp_path: Path,
                                                                                      torch_python: str) -> None:
    """A kernel wrong only at lengths off its tiles (cuDNN attention in 2.5): the default numerics check's
    shape never reaches it, the backends check names it."""
    checks = ("sdpa[float32]/numerics", "sdpa[float32]/sdpa-backends")
    real = outcomes(torch_python, tmp_path / "real", *checks)
    assert {c: real[c]["outcome"] for c in checks} == dict.fromkeys(checks, "passed"), real
    assert "MATH" in real[checks[1]]["reason"] and "FLASH_ATTENTION" in real[checks[1]]["reason"]
    broken = str(interpreter(torch_python, tmp_path / "py", breaks=["sdpa-flash-odd-lengths"]))
    by_id = outcomes(broken, tmp_path / "out", *checks)
    assert by_id[checks[0]]["outcome"] == "passed", by_id[checks[0]]["reason"]
    backends = by_id[checks[1]]
    assert backends["outcome"] == "failed" and "first: FLASH_ATTENTION/causal: " in backends["reason"], backends["reason"]
    wrong = {k for k, v in backends["metrics"]["checked"].items() if v["mismatched_count"]}
    assert wrong == {"FLASH_ATTENTION/causal", "FLASH_ATTENTION/masked"}  # the tiled case (64) is right


@pytest.mark.fast  # in the fast tier: one of the few e2e tests that together run every module
def test_a_changed_default_sdpa_backend_is_shown_not_failed(tmp_path: Path, torch_python: str) -> None:
    moved = str(interpreter(torch_python, tmp_path / "py", breaks=["sdpa-default-math"]))
    code, cand = compared(torch_python, moved, tmp_path / "out", "sdpa[float32]/sdpa-backends")
    result = cand["sdpa[float32]/sdpa-backends"]
    assert (code, result["outcome"]) == (0, "passed"), result["reason"]
    assert "the default backend changed since baseline" in result["reason"]
    assert result["metrics"]["default_backend_changed"]["causal"] == ["FLASH_ATTENTION", "MATH"]
