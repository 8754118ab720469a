"""The compile family (compile, compile-mode) against torches broken the ways it exists to catch, each beside what
the real torch passes: a torch.compile that runs eagerly, a graph break, a miscompiled backward, an Inductor assert
under max-autotune, a recompile at a dynamic size, a change to eager and compiled alike (against the baseline's)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import load_report, run_cli
from harness import interpreter
from test_checks_catch_breakage import GELU_MODEL, compared, outcomes

pytestmark = pytest.mark.usefixtures("torch_python")


def test_a_torch_that_runs_the_model_eagerly_fails_compile_where_eager_numerics_pass(tmp_path: Path,
                                                                                    torch_python: str) -> None:
    """no-compile: torch.compile silently runs the model eagerly (as Dynamo does past its recompile limit)."""
    checks = ("mlp[float32]/numerics", "mlp[float32]/compile")
    broken = str(interpreter(torch_python, tmp_path / "py", breaks=["no-compile"]))
    by_id = outcomes(broken, tmp_path / "out", *checks)
    assert by_id["mlp[float32]/numerics"]["outcome"] == "passed", by_id["mlp[float32]/numerics"]["reason"]
    compiled = by_id["mlp[float32]/compile"]
    assert compiled["outcome"] == "failed" and "compiled no graph" in compiled["reason"], compiled["reason"]


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


def test_a_graph_break_new_in_the_candidate_fails_compile_unless_the_workload_allows_it(tmp_path: Path,
                                                                                         torch_python: str) -> None:
    broken = str(interpreter(torch_python, tmp_path / "py", breaks=["graph-break"]))
    alone = outcomes(broken, tmp_path / "run", "mlp[float32]/compile")["mlp[float32]/compile"]
    assert alone["outcome"] == "passed" and "graph break" in alone["reason"]  # one torch: listed, judged alone
    assert alone["metrics"]["fullgraph"] is False and alone["metrics"]["graph_breaks"] >= 1
    assert "; fullgraph=True fails: " in alone["reason"] and alone["metrics"]["fullgraph_error"]
    (tmp_path / "gelu_model.py").write_text(GELU_MODEL)
    (tmp_path / "torch-upgrade-check.yml").write_text(
        "version: 1\nsuite: none\npython-path: [.]\nworkloads:\n"
        "  - name: strict\n    factory: gelu_model:build\n    aspects: [compile]\n"
        "  - name: lenient\n    factory: gelu_model:build\n    aspects: [compile]\n    allow-graph-breaks: true\n")
    code, cand = compared(torch_python, broken, tmp_path / "out", cwd=tmp_path)
    strict, lenient = cand["strict[float32]/compile"], cand["lenient[float32]/compile"]
    assert (code, strict["outcome"], lenient["outcome"]) == (1, "failed", "passed"), (strict["reason"], lenient["reason"])
    assert strict["reason"].startswith("new in the candidate: ") and "no longer one graph" in strict["reason"]
    assert "graph_break()" in strict["reason"] and strict["metrics"]["baseline_graph_breaks"] == 0
    # both sides' post-grad graphs are in report.json, and the first node where they part is named
    diff = strict["metrics"]["first_graph_difference"]
    assert "the post-grad graphs first differ at graph 1, node " in strict["reason"], strict["reason"]
    assert diff["baseline"] != diff["candidate"] and strict["metrics"]["post_grad_graphs"]
    assert "allowed by the workload's allow-graph-breaks" in lenient["reason"]


DYNAMIC_MODEL = """import torch
from torch import nn
from torch.nn import functional as F


class Scaled(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(16))
        self.v = nn.Parameter(torch.randn(16, 4))

    def forward(self, x):
        return F.gelu(x * self.w).matmul(self.v)  # no nn.Linear


def build():
    return {"model": Scaled(), "inputs": (torch.randn(32, 16),), "loss": lambda out: out.square().sum(),
            "dynamic_inputs": [(torch.randn(8, 16),), (torch.randn(48, 16),)]}
"""
# mlp's compile (its batch dimension marked dynamic: batches 32, 8 and 48) and compile-mode (max-autotune-no-cudagraphs
# on the CPU), and a team's workload compiled with dynamic=True over batches 32, 8 and 48
COMPILED = ("mlp[float32]/compile", "mlp[float32]/compile-mode", "dyn[float32]/compile")


def compile_project(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "dyn_model.py").write_text(DYNAMIC_MODEL)
    (folder / "torch-upgrade-check.yml").write_text(
        "version: 1\nsuite: [mlp]\npython-path: [.]\nworkloads:\n"
        "  - {name: dyn, factory: 'dyn_model:build', aspects: [compile], compile: {dynamic: true}}\n")
    return folder


def test_compile_as_teams_ship_it_passes_the_same_torch_on_both_sides(tmp_path: Path, torch_python: str) -> None:
    """The A/A of issue 33's compile checks: a mode (compile-mode), mark_dynamic over mlp's batches and dynamic=True
    over a team's, and the candidate's compiled outputs against the baseline's; the team's TORCHINDUCTOR_* setting
    applies and each side records it."""
    folder = compile_project(tmp_path)
    code, cand = compared(torch_python, torch_python, tmp_path / "out", *COMPILED, cwd=folder,
                          env={"TORCHINDUCTOR_FREEZING": "0"})
    assert code == 0 and {c: r["outcome"] for c, r in cand.items()} == dict.fromkeys(COMPILED, "passed"), \
        {c: r["reason"] for c, r in cand.items()}
    reports = load_report(tmp_path / "out")["reports"]
    assert all(r["environment"]["compile_env"].get("TORCHINDUCTOR_FREEZING") == "0" for r in reports)
    mlp, mode, dyn = (cand[c] for c in COMPILED)
    assert mlp["metrics"]["dynamic_marked"] == ["input0 dim 0"] and mlp["metrics"]["compile_options"] == {}
    assert [(s["size"], s["graphs"]) for s in mlp["metrics"]["dynamic_sizes"]] == [("[8, 64]", 0), ("[48, 64]", 0)]
    assert mode["metrics"]["compile_options"] == {"mode": "max-autotune-no-cudagraphs"}
    assert mode["reason"].startswith("torch.compile(model, mode='max-autotune-no-cudagraphs'): all 9 tensors")
    assert dyn["metrics"]["compile_options"] == {"dynamic": True} and "dynamic_marked" not in dyn["metrics"]
    assert "2 other sizes (dynamic=True): no recompile" in dyn["reason"]
    for r in (mlp, mode, dyn):
        assert "against baseline 2.13.0" in r["reason"] and r["metrics"]["vs_baseline"]["tensors"] >= 3, r["reason"]
        assert r["metrics"]["compile_env"].get("TORCHINDUCTOR_FREEZING") == "0"


def test_compile_fails_where_a_team_compiles_a_broken_torch(tmp_path: Path, torch_python: str) -> None:
    """Three breaks the default compile of static inputs in one version does not see: an Inductor assert only under
    max_autotune (compile-mode); a size that specialises a dynamic dimension (mark_dynamic: it no longer compiles
    there; dynamic=True: a recompile the baseline did not have); a change to eager and compiled alike (linear-1e-3),
    which compile against its own eager passes and the baseline's compiled outputs fail."""
    from torch_upgrade_check.analysis import closeness

    folder = compile_project(tmp_path)
    broken = str(interpreter(torch_python, tmp_path / "py",
                             breaks=["max-autotune-asserts", "recompile-at-size-48", "linear-1e-3"]))
    code, cand = compared(torch_python, broken, tmp_path / "out", *COMPILED, cwd=folder)
    mlp, mode, dyn = (cand[c] for c in COMPILED)
    assert code == 1 and [mlp["outcome"], mode["outcome"], dyn["outcome"]] == ["failed"] * 3, \
        {c: r["reason"] for c, r in cand.items()}
    assert mode["reason"].startswith("torch.compile(model, mode='max-autotune-no-cudagraphs') raises "
                                     "BackendCompilerFailed: backend='inductor' raised: AssertionError: expected a "
                                     "template choice"), mode["reason"]
    assert mlp["reason"].startswith("the compiled model raises at size [48, 64]: ConstraintViolationError: "), mlp["reason"]
    assert "specialized it to be a constant (48)" in mlp["reason"]
    assert "template choice" not in mlp["reason"]  # max-autotune-asserts: compile-mode's mode only, not the default's
    assert dyn["reason"].startswith("new in the candidate: recompiled at size [48, 16] (1 graph, baseline 2.13.0"), \
        dyn["reason"]
    # linear-1e-3: against its own eager (and at the size that ran) mlp's compile passes; against the baseline's fails
    m = mlp["metrics"]
    assert closeness.judge(m, "compile", "float32")[0].value == "passed"
    assert closeness.judge(m["vs_baseline"], "cross-version", "float32")[0].value == "failed"
    assert "the compiled outputs differ from baseline 2.13.0" in mlp["reason"] and "worst grad:" in mlp["reason"]
    assert closeness.judge(dyn["metrics"]["vs_baseline"], "cross-version", "float32")[0].value == "passed"  # no Linear


def test_a_miscompiled_backward_fails_compile_where_eager_numerics_pass(tmp_path: Path, torch_python: str) -> None:
    """compile judges the training step, not only the forward: a gradient only the compiled backward gets wrong."""
    checks = ("mlp[float32]/numerics", "mlp[float32]/compile", "transformer_block[float32]/compile")
    broken = str(interpreter(torch_python, tmp_path / "py", breaks=["compiled-backward-5pct"]))
    by_id = outcomes(broken, tmp_path / "out", *checks)
    assert by_id["mlp[float32]/numerics"]["outcome"] == "passed", by_id["mlp[float32]/numerics"]["reason"]
    compiled = by_id["mlp[float32]/compile"]
    assert compiled["outcome"] == "failed", compiled["reason"]
    assert "worst grad:0." in compiled["reason"] and compiled["metrics"]["training_step"] is True
    assert compiled["metrics"]["fullgraph"] is True  # one graph, and wrong: the breakage adds no break
    assert by_id["transformer_block[float32]/compile"]["outcome"] == "passed"  # relu: no gelu to miscompile
