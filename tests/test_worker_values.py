"""The values the worker compares are the ones the workload computed with (issue 37): integer inputs (token ids)
reach every golden and reference as they are, never drawn again; a NaN where the golden has NaN (a fully masked
attention row) is equal, as torch.testing.assert_close(equal_nan=True) has it, and a NaN on one side only fails."""

from __future__ import annotations

import math
import subprocess
from pathlib import Path

import pytest
from conftest import load_report, results_by_id, run_cli, user_project
from test_checks_catch_breakage import compared, compared_broken

pytestmark = pytest.mark.usefixtures("torch_python")

# A language model's shape of input: token ids through nn.Embedding. The factory builds its weights in `dtype`, as
# one that passes torch_dtype to its model does, so the generator has moved on differently by the time the ids are
# drawn: the float64 golden's build draws other ids than the float32 instance's (checked in the test).
TOKENS = """import torch
from torch import nn


class TinyLM(nn.Module):
    def __init__(self, device, dtype):
        super().__init__()
        self.embed = nn.Embedding(100, 16, device=device, dtype=dtype)
        self.head = nn.Linear(16, 32, bias=False, device=device, dtype=dtype)  # every gradient depends on the ids

    def forward(self, ids):
        return self.head(torch.tanh(self.embed(ids)))


def project(out):
    weights = torch.randn(out.shape, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    return (out * weights.to(out.dtype).to(out.device)).sum()


def build(device, dtype):
    model = TinyLM(device, dtype)
    return {"model": model, "inputs": (torch.randint(0, 100, (4, 12), device=device),), "loss": project}


def ids(dtype):
    torch.manual_seed(0)
    return build("cpu", dtype)["inputs"][0]
"""

# Inference over a padded batch: the third sequence is all padding, so every one of its query rows has no key to
# attend to, and nn.MultiheadAttention gives NaN there in every dtype, float64 included (torch 2.13).
PADDED = """import torch
from torch import nn


class Padded(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(16, 2, batch_first=True)

    def forward(self, x, padding):
        return self.attn(x, x, x, key_padding_mask=padding, need_weights=False)[0]


def build():
    padding = torch.zeros(3, 5, dtype=torch.bool)
    padding[2] = True
    return Padded(), (torch.randn(3, 5, 16), padding)
"""

IDS = "tokens[float32]/"


def ran(folder: Path, python: str) -> dict[str, dict]:
    """`run` of the project in `folder` (its config, its workloads): the results by id."""
    proc = run_cli("run", "--python", python, "--device", "cpu", "--out", str(folder / "out"), "--no-job-summary",
                   cwd=folder)
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    return results_by_id(load_report(folder / "out"))


def tokens_project(folder: Path, aspects: str) -> None:
    user_project(folder, {"lm": TOKENS}, f"workloads:\n  - {{name: tokens, factory: 'lm:build', aspects: [{aspects}]}}\n")


def test_token_ids_reach_the_golden_as_they_are(tmp_path: Path, torch_python: str) -> None:
    """Before: the golden (numerics, compile) and export's golden built a float64 instance that drew its own ids, and
    numerics failed on the real torch; every output and gradient is now judged on the instance's own ids."""
    tokens_project(tmp_path, "numerics, compile, export")
    differ = subprocess.run([torch_python, "-c", "import lm, torch; print(torch.equal(lm.ids(torch.float32), "
                             "lm.ids(torch.float64)))"], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert differ.stdout.strip() == "False"  # the workload's own build would give the golden other ids
    by_id = ran(tmp_path, torch_python)
    assert {k: v["outcome"] for k, v in by_id.items()} == dict.fromkeys(
        (IDS + "numerics", IDS + "compile", IDS + "export"), "passed"), {k: v["reason"] for k, v in by_id.items()}
    assert {t["name"] for t in by_id[IDS + "numerics"]["metrics"]["per_tensor"]} == {
        "output", "grad:embed.weight", "grad:head.weight"}
    for check, result in by_id.items():  # float32 against the same function in float64, not another input's: export
        assert result["metrics"]["max_abs_err"] < 1e-4, (check, result["reason"])  # passed on eager's equal error


def test_a_wrong_gradient_fails_cross_version_on_token_ids(tmp_path: Path, torch_python: str) -> None:
    """Before: the baseline's golden had other ids than its outputs, so the cross-version bound (2x the baseline's own
    error) was the outputs' scale and a Linear gradient 5% off passed; the same torch on both sides passes."""
    check = IDS + "cross-version"
    tokens_project(tmp_path / "aa", "cross-version")
    code, cand = compared(torch_python, torch_python, tmp_path / "aa" / "out", check, cwd=tmp_path / "aa")
    assert (code, cand[check]["outcome"]) == (0, "passed"), cand[check]["reason"]
    assert cand[check]["metrics"]["bitwise_equal_to_baseline"] is True
    tokens_project(tmp_path / "ab", "cross-version")
    code, cand = compared_broken(torch_python, tmp_path / "ab", [], ["linear-grad-5pct"])
    assert (code, cand[check]["outcome"]) == (1, "failed"), cand[check]["reason"]
    assert "worst grad:" in cand[check]["reason"] and "× the baseline's" in cand[check]["reason"]


def test_a_fully_masked_row_is_nan_on_both_sides_and_passes(tmp_path: Path, torch_python: str) -> None:
    """Before: the NaN of the all-padding sequence, NaN in the fp64 golden too, failed numerics ("NaN where the golden
    has numbers") and cross-version on the same torch, and the tensor's scale, RMSE and bitwise equality were NaN."""
    user_project(tmp_path, {"padded": PADDED}, "workloads:\n  - {name: padded, factory: 'padded:build', "
                                               "aspects: [numerics, cross-version]}\n")
    code, cand = compared(torch_python, torch_python, tmp_path / "out", "padded[float32]/*", cwd=tmp_path)
    reasons = {k: v["reason"] for k, v in cand.items()}
    assert code == 0 and {k: v["outcome"] for k, v in cand.items()} == {
        "padded[float32]/numerics": "passed", "padded[float32]/cross-version": "passed"}, reasons
    for check in cand.values():
        (output,) = check["metrics"]["per_tensor"]
        assert output["nan"] == 0 and output["nan_as_golden"] == 5 * 16, output  # the padded sequence, NaN alike
        assert math.isfinite(float(output["scale"])) and math.isfinite(float(output["rmse"])), output
    assert cand["padded[float32]/cross-version"]["metrics"]["bitwise_equal_to_baseline"] is True
    assert "80 NaN where the golden has NaN" in reasons["padded[float32]/numerics"]


def test_a_nan_on_one_side_only_still_fails(torch_python: str) -> None:
    """NaN where the golden has a number, and a number where the golden has NaN, each fail, named as such; NaN in
    the same places passes."""
    import torch

    from torch_upgrade_check.analysis.closeness import judge
    from torch_upgrade_check.worker.tensors import compare

    golden = torch.tensor([[1.0, 2.0, 3.0], [math.nan, math.nan, math.nan]], dtype=torch.float64)
    same = golden.float()
    extra_nan = same.clone()
    extra_nan[0, 1] = math.nan
    filled = same.clone()
    filled[1] = 0.0  # a kernel that now returns zeros for a fully masked row
    for result, outcome, why in ((same, "passed", "3 NaN where the golden has NaN"),
                                 (extra_nan, "failed", "1 NaN where the golden has numbers"),
                                 (filled, "failed", "3 numbers where the golden has NaN")):
        m = {**compare({"output": result}, {"output": golden}, rtol=1.3e-6, atol=1e-5, reference={"output": same},
                       dtype="float32"), "rtol": 1.3e-6, "atol": 1e-5}
        for aspect in ("numerics", "cross-version"):
            got, reason, _ = judge(m, aspect, "float32")
            assert (got.value, why in reason) == (outcome, True), (aspect, reason)
