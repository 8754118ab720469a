"""The numerics check against a torch broken on purpose (harness: sdpa-zero-grad, linear-grad-5pct): each fails the
numerics checks of the workloads that call the broken op, naming a gradient, and passes the others
(tests/test_checks_catch_breakage.py runs the same checks on the real torch, all passing)."""

from __future__ import annotations

from pathlib import Path

import pytest
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
