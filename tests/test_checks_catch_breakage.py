"""Each correctness check against a torch broken on purpose in exactly the way it claims to catch (and the
same checks passing on the real torch). Before per-tensor judgement, a zero SDPA gradient passed in
bfloat16 and a 5% wrong Linear input gradient passed transformer_block; before Dynamo was reset and
counted, compile checks past the recompile limit passed in 0.0 s, eager against eager."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import load_report, results_by_id, run_cli
from harness import interpreter

pytestmark = pytest.mark.usefixtures("torch_python")
CHECKS = ("sdpa[float32]/numerics", "sdpa[bfloat16]/numerics", "transformer_block[float32]/numerics",
          "mlp[float32]/numerics", "mlp[float32]/compile")


def outcomes(python: str, out: Path, *only: str) -> dict[str, dict]:
    args = ["run", "--python", python, "--device", "cpu", "--out", str(out), "--no-job-summary"]
    for o in only:
        args += ["--only", o]
    proc = run_cli(*args)
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    return results_by_id(load_report(out))


def test_the_real_torch_passes_these_checks(tmp_path: Path, torch_python: str) -> None:
    by_id = outcomes(torch_python, tmp_path, *CHECKS)
    assert {k: v["outcome"] for k, v in by_id.items()} == dict.fromkeys(CHECKS, "passed")


@pytest.mark.parametrize(("breakage", "failing", "where"), [
    # nn.MultiheadAttention calls scaled_dot_product_attention too
    ("sdpa-zero-grad", ("sdpa[float32]/numerics", "sdpa[bfloat16]/numerics", "transformer_block[float32]/numerics"),
     "grad:"),
    ("linear-grad-5pct", ("transformer_block[float32]/numerics", "mlp[float32]/numerics"), "grad:"),
    ("no-compile", ("mlp[float32]/compile",), "compiled no graph"),
])
def test_a_broken_torch_fails_the_check_that_claims_to_catch_it(tmp_path: Path, torch_python: str, breakage: str,
                                                                failing: tuple[str, ...], where: str) -> None:
    broken = str(interpreter(torch_python, tmp_path / "py", breaks=[breakage]))
    by_id = outcomes(broken, tmp_path / "out", *CHECKS)
    for check in CHECKS:
        expected = "failed" if check in failing else "passed"
        assert by_id[check]["outcome"] == expected, (check, by_id[check]["reason"])
    assert all(where in by_id[c]["reason"] for c in failing)


def test_every_compile_check_compiles_however_many_share_a_forward(tmp_path: Path) -> None:
    """Twelve nn.Sequential workloads share one forward: past Dynamo's recompile limit (8) the rest ran eagerly."""
    (tmp_path / "twelve.py").write_text("import torch\nfrom torch import nn\n\n" + "".join(
        f"def build{i}():\n    return nn.Sequential(nn.Linear(8, {8 + i}), nn.Tanh()), (torch.randn(4, 8),)\n\n"
        for i in range(12)))
    (tmp_path / "torch-upgrade-check.yml").write_text("version: 1\nsuite: none\npython-path: [.]\nworkloads:\n" + "".join(
        f"  - name: seq{i}\n    factory: twelve:build{i}\n    aspects: [compile]\n" for i in range(12)))
    proc = run_cli("run", "--device", "cpu", "--out", str(tmp_path / "out"), "--no-job-summary", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = load_report(tmp_path / "out")["results"]
    assert len(results) == 12
    assert all(r["outcome"] == "passed" and r["metrics"]["graphs_compiled"] >= 1 for r in results), \
        [(r["id"], r["metrics"].get("graphs_compiled")) for r in results]
