"""latency (issue 35): a torch whose one aten op is slower fails the latency A/B, and the failure's attribution names
that op (op-latency's replay names it too); the same torch on both sides passes and names none."""

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
