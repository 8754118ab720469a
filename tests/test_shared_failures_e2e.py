"""`compare` end to end with a correctness failure the baseline shares: the same torch on both sides, broken by the
harness (linear-1e-3: every float32 Linear 0.1% off, so mlp's numerics fails against its fp64 golden)."""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree as ET

import harness
import pytest
from conftest import run_cli

pytestmark = pytest.mark.usefixtures("torch_python")
NUMERICS = "mlp[float32]/numerics"


def compare(tmp_path: Path, torch_python: str, baseline: str, candidate: str, *extra: str):
    """compare of mlp's float32 numerics (and its cross-version check) with each side's breakage; the candidate's
    results by id."""
    out = tmp_path / "out"
    sides = {role: harness.interpreter(torch_python, tmp_path / role, breaks=[b] if b else [])
             for role, b in (("baseline", baseline), ("candidate", candidate))}
    proc = run_cli("compare", "--baseline-python", str(sides["baseline"]), "--candidate-python",
                   str(sides["candidate"]), "--device", "cpu", "--threads", "1", "--only", NUMERICS,
                   "--out", str(out), *extra)
    doc = json.loads((out / "report.json").read_text())
    return proc, {r["id"]: r for r in doc["reports"][1]["results"]}, out


def test_a_failure_both_sides_share_at_the_same_size_warns_and_passes(tmp_path: Path, torch_python: str) -> None:
    proc, cand, out = compare(tmp_path, torch_python, "linear-1e-3", "linear-1e-3")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    numerics = cand[NUMERICS]
    assert numerics["outcome"] == "suspicious", numerics
    assert numerics["reason"].startswith("the model's own, not the upgrade's: also failed on baseline"), numerics
    assert "outside atol·scale + rtol·|golden|" in numerics["reason"]  # the check's own reason stays
    assert numerics["metrics"]["shared_with_baseline"]["why"].startswith("at the same size")
    assert cand["mlp[float32]/cross-version"]["outcome"] == "passed"  # the same torch: nothing changed
    headline = (out / "summary.md").read_text().splitlines()[0].replace("\\", "")  # Markdown's escapes off
    assert headline.startswith("## ✅ passed: 2 checks on cpu, torch"), headline
    assert headline.endswith("(1 failure the baseline shares (the model's own, not the upgrade's))"), headline
    suite = next(s for s in ET.parse(out / "junit.xml").getroot().iter("testsuite") if " candidate " in s.get("name", ""))
    assert suite.get("failures") == "0"
    case = next(c for c in suite.iter("testcase") if c.get("name") == NUMERICS)
    assert case.find("failure") is None and case.find("error") is None  # it passes, with its note
    assert case.findtext("system-out", "").startswith("shared failure (the model's own, not the upgrade's) (warns")


def test_the_input_fails_a_shared_failure(tmp_path: Path, torch_python: str) -> None:
    proc, cand, _ = compare(tmp_path, torch_python, "linear-1e-3", "linear-1e-3", "--fail-on-shared-failures")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr
    numerics = cand[NUMERICS]
    assert numerics["outcome"] == "failed", numerics
    assert "the model's own, not new; fail-on-shared-failures fails it" in numerics["reason"], numerics


def test_a_candidate_failure_larger_than_the_baselines_fails(tmp_path: Path, torch_python: str) -> None:
    """linear-1e-2 on the candidate: the same change, ten times larger; its numerics is not excused (cross-version
    fails too, as it should)."""
    proc, cand, _ = compare(tmp_path, torch_python, "linear-1e-3", "linear-1e-2")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr
    numerics = cand[NUMERICS]
    assert numerics["outcome"] == "failed", numerics
    assert "but larger here: worst error" in numerics["reason"] and "the upgrade's, so it fails" in numerics["reason"]
    assert "shared_with_baseline" not in numerics["metrics"]


def test_a_failure_only_the_candidate_has_fails(tmp_path: Path, torch_python: str) -> None:
    proc, cand, _ = compare(tmp_path, torch_python, "", "linear-1e-3")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr
    assert cand[NUMERICS]["outcome"] == "failed" and "new in the candidate" in cand[NUMERICS]["reason"]
