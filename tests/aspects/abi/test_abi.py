"""The abi check: extensions built here, linked against the real libc10, read with pyelftools against torch's exports
(Mach-O: test_abi_macho.py).

An extension built for another torch needs a symbol this torch no longer exports: `stale` needs the constructor
`c10::MessageLogger::MessageLogger(char const*, int, int)`, the form torch exported before it took a
SourceLocation, and `good` the one torch 2.13.0 exports, `c10::MessageLogger::MessageLogger(c10::SourceLocation,
int, bool)`. Neither is loaded: the check reads files, so it finds an extension that only loads on first use.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import run_cli
from harness import interpreter
from stack_envs import NOW, OLD, build_env, build_extension, torch_lib

from torch_upgrade_check.aspects.abi import host as abi
from torch_upgrade_check.aspects.imports import host as imports

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="no C compiler here to build the extensions")


@pytest.fixture(scope="module")
def envs(tmp_path_factory: pytest.TempPathFactory, torch_python: str) -> dict[str, str]:
    root = tmp_path_factory.mktemp("abi")
    libc10 = abi.read_elf(torch_lib() / "libc10.so")
    assert NOW in libc10.defined and OLD not in libc10.defined  # the premise, on the torch under test
    good, stale = build_extension(root / "src", "good", NOW), build_extension(root / "src", "stale", OLD)
    plain = build_extension(root / "src", "plain", "tuc_elsewhere", links_torch=False)  # a C library: no torch
    packages = {"tuc_good": "", "tuc_stale": ""}  # an extension loaded lazily: importing the package loads nothing
    return {"good": str(build_env(root / "good", {"tuc_good": ""}, {"tuc_good": good})),
            "stale": str(build_env(root / "stale", packages, {"tuc_good": good, "tuc_stale": stale})),
            "plain": str(build_env(root / "plain", {"tuc_plain": ""}, {"tuc_plain": plain}))}


def _environment(python: str) -> abi.Environment:
    return abi.Environment({d: (v["version"], v["libraries"]) for d, v in imports.listing(python).items()})


def test_an_extension_needing_a_symbol_torch_does_not_export_fails(envs: dict[str, str]) -> None:
    results = abi.check({"baseline": _environment(envs["good"]), "candidate": _environment(envs["stale"])},
                        device="cpu", repro="", labels={"baseline": "2.13.0", "candidate": "2.13.0"})
    base, cand = results["baseline"], results["candidate"]
    assert base.outcome.value == "passed" and base.metrics["extensions"] == 1, base.reason
    assert cand.outcome.value == "failed" and cand.metrics["extensions"] == 2
    assert cand.reason == ("1 of 2 shared objects linking torch need symbols torch 2.13.0 does not export: "
                           "_stale.cpython-311-x86_64-linux-gnu.so (tuc-stale 1.0, new in the candidate's stack) "
                           "needs c10::MessageLogger::MessageLogger(char const*, int, int)")  # the baseline lacks it
    (missing,) = cand.metrics["missing"].values()
    assert missing["mangled"] == [OLD] and missing["distribution"] == "tuc-stale"


def test_no_shared_object_linking_torch_is_a_skip_not_a_pass(envs: dict[str, str]) -> None:
    """Issue 46 item 6: a venv whose shared objects link no torch library (a C extension of its own) compares nothing
    against torch's exports; it passed as "no shared object here links torch's libraries"."""
    env = _environment(envs["plain"])
    assert any(Path(p).name.startswith("_plain.") for _, ps in env.libraries.values() for p in ps)  # it was listed
    result = abi.check({"candidate": env}, device="cpu", repro="", labels={"candidate": "2.13.0"})["candidate"]
    assert result.outcome.value == "skipped" and result.metrics["extensions"] == 0, result.reason
    assert result.reason.startswith("no shared object here links torch's libraries (") and result.reason.endswith(
        "none needs libtorch or libc10), so none was checked against torch 2.13.0's exports"), result.reason


def test_the_compare_fails_on_the_stale_extension_and_a_a_passes(tmp_path: Path, envs: dict[str, str]) -> None:
    def compare(out: str, baseline: str, candidate: str) -> tuple[int, dict]:
        proc = run_cli("compare", "--baseline-python", str(interpreter(envs[baseline], tmp_path / f"{out}-b")),
                       "--candidate-python", str(interpreter(envs[candidate], tmp_path / f"{out}-c")),
                       "--only", "abi", "--device", "cpu", "--out", str(tmp_path / out))
        reports = json.loads((tmp_path / out / "report.json").read_text())["reports"]
        return proc.returncode, {r["id"]: r for r in reports[1]["results"]}["stack[-]/abi"]

    code, result = compare("ab", "good", "stale")
    assert code == 1 and result["outcome"] == "failed", result
    assert "c10::MessageLogger::MessageLogger(char const*, int, int)" in result["reason"]
    code, result = compare("aa", "good", "good")
    assert code == 0 and result["outcome"] == "passed", result
    assert result["reason"] == "every torch symbol the 1 shared objects linking torch need is exported by torch 2.13.0+cpu"


def test_demangling_and_what_counts_as_linking_torch() -> None:
    assert abi.demangle(NOW) == "c10::MessageLogger::MessageLogger(c10::SourceLocation, int, bool)"
    assert abi.demangle("not_mangled") == "not_mangled"
    assert abi.links_torch(abi.Elf(needed=("libc10.so", "libc.so.6")))
    assert not abi.links_torch(abi.Elf(needed=("libtorchvision_thing.so", "libc.so.6")))
