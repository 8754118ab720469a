"""op-latency (issue 35): one aten op slower at the team's shapes is named by op-latency's replay (and by a failed
latency check's attribution), even where the model's latency passes; an op only the candidate cannot run is named,
never passed; the same torch on both sides names none."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness import interpreter
from test_checks_catch_breakage import compared

pytestmark = pytest.mark.usefixtures("torch_python")


@pytest.mark.serial  # its verdicts are timings: run alone, after the parallel phase
def test_one_slower_aten_op_is_named_by_the_latency_attribution_and_op_latency_and_its_aa_names_none(
        tmp_path: Path, torch_python: str) -> None:
    """Issue 35: a latency failure said "2.2x slower" and nothing else, where real regressions are often one op at the
    team's shapes. Here gelu's CPU kernel runs 4 times a call (outputs exact): mlp's forward is about 2x slower, and
    both the failed latency check's attribution and op-latency's replay name aten gelu at [32, 128]; the same torch on
    both sides names no op."""
    checks = ("mlp[float32]/latency", "mlp[float32]/op-latency")
    slower = str(interpreter(torch_python, tmp_path / "py", breaks=["gelu-slower"]))
    code, cand = compared(torch_python, slower, tmp_path / "out", *checks, extra=("--ab-budget", "5"))
    lat, ops = cand[checks[0]], cand[checks[1]]
    assert (code, lat["outcome"]) == (1, "failed") and lat["metrics"]["change"] in ("regression", "undecided"), lat
    table = lat["metrics"]["op_attribution"]
    top = table["ops"][0]
    assert (top["op"], top["shapes"], top["dtypes"]) == ("aten::gelu", [[32, 128]], ["float32"]), table["ops"]
    # its share of the A/B's slowdown read 46-151% on the shared machine (docs/benchmarks.md): only that there is one
    assert top["ratio"] > 2 and top["share"] > 0 and table["rounds"][0] == table["rounds"][1] >= 3, top
    assert "; most of it in aten::gelu [32, 128] float32: " in lat["reason"], lat["reason"]
    summary = (tmp_path / "out" / "summary.md").read_text()
    where = summary.index("**Where the time went: mlp\\[float32\\]\\/latency")
    assert summary.index("| mlp\\[float32\\]\\/latency |") < where < summary.index("**Reproduce**")
    assert "- aten::gelu [32, 128] float32: " in (tmp_path / "out" / "junit.xml").read_text()
    # op-latency: the baseline's recorded ops timed on both sides; gelu's forward calls named (its backward is not slowed)
    assert ops["outcome"] == "suspicious" and ops["metrics"]["slower_ops"] == ["aten.gelu.default float32[32, 128]"], ops
    assert ops["reason"].startswith("aten.gelu.default float32[32, 128] ") and "warns" in ops["reason"]
    code, same = compared(torch_python, torch_python, tmp_path / "aa", *checks, extra=("--ab-budget", "5"))
    assert code == 0 and same[checks[0]]["outcome"] != "failed", same[checks[0]]["reason"]
    assert (same[checks[1]]["outcome"], same[checks[1]]["metrics"]["slower_ops"]) == ("passed", []), same[checks[1]]


WIDE_MODEL = """import torch
from torch import nn
from torch.nn import functional as F


class Wide(nn.Module):  # a large matmul beside a small GELU: the GELU is about 1% of the forward
    def __init__(self) -> None:
        super().__init__()
        self.big = nn.Linear(1024, 1024)
        self.side = nn.Parameter(torch.randn(128))

    def forward(self, x, y):
        return self.big(x) + F.gelu(y * self.side).mean()


def build():
    return {"model": Wide(), "inputs": (torch.randn(512, 1024), torch.randn(32, 128)),
            "loss": lambda out: out.square().mean()}
"""


@pytest.mark.serial  # its verdicts are timings: run alone, after the parallel phase
def test_one_op_slower_where_the_models_latency_passes_is_named_by_op_latency(tmp_path: Path,
                                                                              torch_python: str) -> None:
    """Issue 35 item 2: a single-op regression is named even where the model-level change is under the latency
    threshold. GELU 4x slower a call is about 1% of this team's forward (a large matmul beside it): latency does not
    fail, and op-latency names aten gelu at [32, 128], as a warning (exit 0)."""
    (tmp_path / "wide_model.py").write_text(WIDE_MODEL)
    (tmp_path / "torch-upgrade-check.yml").write_text(
        "version: 1\nsuite: []\npython-path: [.]\nworkloads:\n  - {name: wide, factory: 'wide_model:build'}\n")
    checks = ("wide[float32]/latency", "wide[float32]/op-latency")
    slower = str(interpreter(torch_python, tmp_path / "py", breaks=["gelu-slower"]))
    code, cand = compared(torch_python, slower, tmp_path / "out", *checks, extra=("--ab-budget", "5"), cwd=tmp_path)
    lat, ops = cand[checks[0]], cand[checks[1]]
    assert lat["outcome"] != "failed" and lat["metrics"]["change"] != "regression", lat["reason"]
    assert ops["outcome"] == "suspicious" and ops["metrics"]["slower_ops"] == ["aten.gelu.default float32[32, 128]"], \
        ops["reason"]
    assert code == 0


def test_an_op_the_candidate_alone_cannot_run_is_named_by_op_latency_never_passed(tmp_path: Path,
                                                                                  torch_python: str) -> None:
    """Issue 46 item 6: aten gelu raises on the candidate (gelu-raises): op-latency timed the other ops, left gelu out
    of the comparison and passed ("unchanged"). It warns, naming the op and what the candidate raised."""
    check = "mlp[float32]/op-latency"
    broken = str(interpreter(torch_python, tmp_path / "py", breaks=["gelu-raises"]))
    code, cand = compared(torch_python, broken, tmp_path / "out", check)
    ops = cand[check]
    assert ops["outcome"] == "suspicious", ops["reason"]
    assert ops["reason"].startswith("1 op the baseline timed could not be timed on the candidate, so its latency was "
                                    "never compared: aten.gelu.default float32[32, 128] (NotImplementedError: Could "
                                    "not run 'aten::gelu' with arguments from the 'CPU' backend"), ops["reason"]
    assert list(ops["metrics"]["ops_failed_on_candidate"]) == [k for k in ops["metrics"]["ops_not_timed"]
                                                               if k.startswith("aten.gelu.default")]
    assert ops["metrics"]["ops_timed"] >= 3 and code == 0  # the other ops were compared; op-latency warns only
