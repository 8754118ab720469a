"""The team's own files (config `artifacts:`), loaded with default arguments: the same torch on both sides reproduces
its outputs; a candidate whose `torch.load` refuses a checkpoint an older default read (2.6's weights_only), or whose
`torch.export.load` rejects the program the team saved, fails naming the file and torch's error."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from artifact_family import SCRIPTED_MODEL
from conftest import user_project
from test_checks_catch_breakage import compared_broken

pytestmark = pytest.mark.usefixtures("torch_python")
CKPT, WEIGHTS, PROGRAM = "ckpt[-]/artifact", "weights[-]/artifact", "program[-]/artifact"

SHIPPED = SCRIPTED_MODEL + '''

import dataclasses


@dataclasses.dataclass
class RunConfig:
    lr: float = 0.1


def example_inputs():
    return (torch.linspace(-2, 2, 64).reshape(4, 16),)


def fresh_inputs():  # unseeded, as a team's may be: the candidate must run the baseline's, not draw its own
    return (torch.randn(4, 16),)


def ship():
    torch.manual_seed(0)
    model, _ = build()
    torch.save({"model": model.state_dict(), "config": RunConfig()}, "ckpt.pt")
    torch.save(model.state_dict(), "weights.pt")
    torch.export.save(torch.export.export(model.eval(), example_inputs()), "program.pt2")
'''


def shipped(folder: Path, torch_python: str) -> None:
    """Three files a team ships, saved by the real torch: a checkpoint holding a config object (a class of the team's,
    which 2.6's weights_only default refuses), a bare state_dict, and a torch.export program."""
    user_project(folder, {"shipmod": SHIPPED}, "artifacts:\n"
                 "  - {name: ckpt, file: ckpt.pt, factory: 'shipmod:build'}\n"
                 "  - {name: weights, file: weights.pt}\n"
                 "  - {name: program, file: program.pt2, inputs: 'shipmod:fresh_inputs'}\n")
    subprocess.run([torch_python, "-c", "import shipmod; shipmod.ship()"], cwd=folder, check=True, timeout=300)


def test_the_same_torch_on_both_sides_reproduces_the_shipped_files_outputs(tmp_path: Path, torch_python: str) -> None:
    shipped(tmp_path, torch_python)
    code, cand = compared_broken(torch_python, tmp_path, ["old-load-default"], ["old-load-default"])  # ckpt.pt loads
    assert code == 0, cand
    assert {c: cand[c]["outcome"] for c in (CKPT, WEIGHTS, PROGRAM)} == dict.fromkeys((CKPT, WEIGHTS, PROGRAM), "passed")
    assert cand[PROGRAM]["reason"].startswith("the shipped export file program.pt2 loads with default arguments and "
                                              "reproduces baseline "), cand[PROGRAM]["reason"]
    assert "'s outputs: one tensor within rtol " in cand[PROGRAM]["reason"]
    assert "'s outputs: all 2 tensors within rtol " in cand[WEIGHTS]["reason"]  # weight and bias, no factory


def test_a_candidate_whose_loaders_refuse_the_shipped_files_fails_naming_them(tmp_path: Path, torch_python: str) -> None:
    """Baseline: torch.load before 2.6 (weights_only=False by default). Candidate: the real torch.load, and a
    torch.export at a newer schema that rejects the program the team saved."""
    shipped(tmp_path, torch_python)
    code, cand = compared_broken(torch_python, tmp_path, ["old-load-default"], ["export-schema-bump"])
    assert code == 1
    assert {c: cand[c]["outcome"] for c in (CKPT, WEIGHTS, PROGRAM)} == {CKPT: "failed", WEIGHTS: "passed",
                                                                        PROGRAM: "failed"}, cand
    assert cand[CKPT]["reason"].startswith("the shipped checkpoint file ckpt.pt does not load and run with default "
                                           "arguments: torch.load: UnpicklingError: WeightsUnpickler error: Unsupported "
                                           "global: GLOBAL shipmod.RunConfig"), cand[CKPT]["reason"]
    assert "call torch.serialization.add_safe_globals([shipmod.RunConfig])" in cand[CKPT]["reason"]
    assert "; it loaded on baseline " in cand[CKPT]["reason"]
    assert cand[PROGRAM]["reason"].startswith("the shipped export file program.pt2 does not load and run with default "
                                              "arguments: torch.export.load: SerializeError: Serialized schema "
                                              "version"), cand[PROGRAM]["reason"]


def test_a_shipped_file_that_loads_and_computes_other_numbers_fails_naming_the_difference(tmp_path: Path,
                                                                                        torch_python: str) -> None:
    """Issue 37: the shipped files met only loaders that refuse them. Here the candidate's torch.export.load reads the
    team's program.pt2 into a program whose outputs are x(1+1e-3) (shipped-file-1e-3): it fails, by how much."""
    shipped(tmp_path, torch_python)
    code, cand = compared_broken(torch_python, tmp_path, ["old-load-default"], ["old-load-default", "shipped-file-1e-3"])
    assert code == 1
    assert {c: cand[c]["outcome"] for c in (CKPT, WEIGHTS, PROGRAM)} == {CKPT: "passed", WEIGHTS: "passed",
                                                                        PROGRAM: "failed"}, cand
    reason = cand[PROGRAM]["reason"]
    assert reason.startswith("the shipped export file program.pt2 loads but does not reproduce baseline "), reason
    assert "'s outputs: 1 of 1 tensors differ; output: 4 of 4 elements, max abs err " in reason, reason
    assert ", max rel err 0.001 (rtol 1.3e-06, atol 1e-05)" in reason, reason
