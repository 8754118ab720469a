"""The numerics check against a torch broken on purpose (harness: sdpa-zero-grad, linear-grad-5pct, flex-grad-5pct):
each fails the numerics checks of the workloads that call the broken op, naming a gradient, and passes the others
(tests/test_checks_catch_breakage.py runs the same checks on the real torch, all passing)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import load_report, results_by_id, run_cli
from harness import interpreter
from test_checks_catch_breakage import CHECKS, outcomes

pytestmark = pytest.mark.usefixtures("torch_python")


@pytest.mark.parametrize(("breakage", "failing"), [
    # nn.MultiheadAttention calls scaled_dot_product_attention too
    ("sdpa-zero-grad", ("sdpa[float32]/numerics", "sdpa[bfloat16]/numerics", "transformer_block[float32]/numerics")),
    ("linear-grad-5pct", ("transformer_block[float32]/numerics", "mlp[float32]/numerics")),
])
def test_a_broken_torch_fails_the_numerics_checks_of_the_workloads_that_call_it(tmp_path: Path, torch_python: str,
                                                                                 breakage: str,
                                                                                 failing: tuple[str, ...]) -> None:
    broken = str(interpreter(torch_python, tmp_path / "py", breaks=[breakage]))
    by_id = outcomes(broken, tmp_path / "out", *CHECKS)
    for check in CHECKS:
        expected = "failed" if check in failing else "passed"
        assert by_id[check]["outcome"] == expected, (check, by_id[check]["reason"])
    assert all("grad:" in by_id[c]["reason"] for c in failing)



def test_flexattentions_gradients_5pct_large_fail_its_numerics_on_emulated_cuda(tmp_path: Path, torch_python: str) -> None:
    """flex-grad-5pct: FlexAttention has no backward on the CPU, so it runs on emulated CUDA (tests/harness); the same
    check on the real torch passes in tests/hardware (test_cuda_flex_gradients_are_compared_and_cross_backend_runs)."""
    check = "flex_attention_alibi[float32]/numerics"
    broken = str(interpreter(torch_python, tmp_path / "py", emulate="cuda", breaks=["flex-grad-5pct"]))
    proc = run_cli("run", "--python", broken, "--device", "cuda", "--out", str(tmp_path / "out"), "--no-job-summary",
                   "--timeout", "300", "--only", check)
    result = results_by_id(load_report(tmp_path / "out"))[check]
    assert (proc.returncode, result["outcome"]) == (1, "failed") and "grad:input" in result["reason"], result["reason"]
