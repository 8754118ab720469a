"""The values the worker compares are the ones the workload computed with (issue 37): integer inputs (token ids)
reach every golden and reference as they are, never drawn again."""

from __future__ import annotations

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
