"""Issue 46 item 3: under CUDA graphs (mode="reduce-overhead") a later call reuses the memory of an earlier call's
outputs, gradients included; the compile check compares what each call computed, not what a later call left there.

CUDA graphs themselves cannot run here: tests/harness/site/tuc_cudagraphs.py emulates their reuse of output memory on
the CPU (each new generation overwrites the outputs of the earlier ones still held), so a check that kept a gradient
of the training step without copying it, then ran the size sweep, compared NaN. On a real GPU torch raises on reading
such a tensor instead; that path is unproven here (docs/hardware.md).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from conftest import load_report, results_by_id, run_cli, user_project
from harness import interpreter

CHECK = "mm[float32]/compile"
CONFIG = ("workloads:\n  - name: mm\n    factory: torch_upgrade_check.worker.workloads:mlp\n    aspects: [compile]\n"
          "    compile: {mode: reduce-overhead}\n")


# the premise, in the emulated interpreter: a compiled call's gradient kept uncopied is overwritten by the next
# generation's call, and a copy is not
PREMISE = """
import torch
from torch import nn
layers = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
model = torch.compile(layers, mode="reduce-overhead")
torch.compiler.cudagraph_mark_step_begin()
grad = torch.autograd.grad(model(torch.randn(4, 8)).square().sum(), [layers[0].weight])[0]
kept = grad.clone()
torch.compiler.cudagraph_mark_step_begin()
with torch.no_grad():
    model(torch.randn(4, 8))
print(bool(grad.isnan().all()), bool(kept.isfinite().all()))
"""


def _compile_check(python: str, project: Path, out: Path) -> dict:
    proc = run_cli("run", "--python", python, "--device", "cpu", "--out", str(out), "--no-job-summary", "--only",
                   CHECK, cwd=project)
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    return results_by_id(load_report(out))[CHECK]


def test_the_compile_check_judges_each_calls_own_gradients_where_cuda_graphs_reuse_their_memory(
        tmp_path: Path, torch_python: str) -> None:
    """mlp compiled with mode="reduce-overhead": the training step's gradients, then the sweep over batches 8 and 48
    (two new generations). Before the gradients were copied, the sweep overwrote them and the check failed on NaN
    gradients of a right torch."""
    user_project(tmp_path / "project", {}, CONFIG)
    graphs = str(interpreter(torch_python, tmp_path / "py", options={"TUC_EMULATE_CUDAGRAPHS": "1"}))
    premise = subprocess.run([graphs, "-c", PREMISE], check=False, capture_output=True, text=True, timeout=300,
                             env={**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")})
    assert premise.stdout.split() == ["True", "True"], premise.stdout + premise.stderr[-3000:]
    result = _compile_check(graphs, tmp_path / "project", tmp_path / "out")
    assert result["outcome"] == "passed", result["reason"]
    m = result["metrics"]
    assert m["compile_options"] == {"mode": "reduce-overhead"} and m["training_step"] is True
    assert [s["size"] for s in m["dynamic_sizes"]] == ["[8, 64]", "[48, 64]"] and m["graphs_compiled"] >= 1
    grads = [t for t in m["per_tensor"] if t["name"].startswith("grad:")]
    assert len(grads) == 6 and not any(t["mismatched"] for t in grads), grads
