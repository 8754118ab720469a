"""Each side's own stack judged as such (issue 45 item 3): a module only the candidate's stack installs that does not
import fails as new, never as "failing with the baseline too"; a package the team's pull request removed from its
own requirements (and what went with it) is reported, not failed.

A git repository made here: `main` requires tuc-kept and tuc-gone (which depends on tuc-gone-dep); the branch
`adds` adds tuc-new, whose import raises (as a package whose native library is missing does); the branch `drops`
removes tuc-gone. The packages are wheels built here into a local folder and installed by pip (`--find-links`)
into real venvs beside this machine's torch, one venv a side, given to `compare` as prepared interpreters; each
side's stack is read at its ref (`--base-ref main --head-ref adds`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import run_cli
from stack_envs import OLD, build_env, build_extension
from team_repo import branched, git

from torch_upgrade_check.aspects.abi import host as abi
from torch_upgrade_check.aspects.imports import host as imports

NEW_ERROR = "ImportError: libtucnew.so.1: cannot open shared object file"
PACKAGES = {  # name -> (its __init__.py, its requirements)
    "tuc-kept": ("", []),
    "tuc-gone": ("import tuc_gone_dep\n", ["tuc-gone-dep"]),
    "tuc-gone-dep": ("", []),
    "tuc-new": (f"raise ImportError({NEW_ERROR.split(': ', 1)[1]!r})\n", []),
}


def wheel(folder: Path, name: str, code: str, requires: list[str], shipped: dict[str, bytes] | None = None) -> Path:
    """A wheel of `name` 1.0 (one package, `shipped` files beside its __init__.py, its dist-info with a hashed RECORD),
    as a build backend makes."""
    module, info = name.replace("-", "_"), f"{name.replace('-', '_')}-1.0.dist-info"
    files: dict[str, str | bytes] = {f"{module}/__init__.py": code,
             **{f"{module}/{n}": data for n, data in (shipped or {}).items()},
             f"{info}/METADATA": "Metadata-Version: 2.1\nName: " + name + "\nVersion: 1.0\n"
                                 + "".join(f"Requires-Dist: {r}\n" for r in requires),
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: tuc-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    raw = {path: text.encode() if isinstance(text, str) else text for path, text in files.items()}
    record = [f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}"
              for path, data in raw.items()]
    out = folder / f"{module}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(out, "w") as z:
        for path, data in raw.items():
            z.writestr(path, data)
        z.writestr(f"{info}/RECORD", "\n".join([*record, f"{info}/RECORD,,"]) + "\n")
    return out


def venv_with(folder: Path, wheels: Path, requirements: list[str]) -> str:
    """A venv holding this machine's torch and `requirements`, installed by pip from the local wheels alone."""
    python = build_env(folder, {})
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-index",
                    "--find-links", str(wheels), *requirements], check=True, capture_output=True, text=True)
    return str(python)


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory, torch_python: str) -> dict[str, Path | str]:
    root = tmp_path_factory.mktemp("sides")
    wheels = root / "wheels"
    wheels.mkdir()
    # tuc-new also ships an extension built for an older torch (loaded lazily: its import does not load it)
    stale = build_extension(root / "ext", "stale", OLD) if shutil.which("gcc") else None
    for name, (code, requires) in PACKAGES.items():
        wheel(wheels, name, code, requires, {stale.name: stale.read_bytes()} if stale and name == "tuc-new" else None)
    repo = branched(root / "repo", {"requirements.txt": "tuc-kept==1.0\ntuc-gone==1.0\n"},
                    {"adds": {"requirements.txt": "tuc-kept==1.0\ntuc-gone==1.0\ntuc-new==1.0\n"},
                     "drops": {"requirements.txt": "tuc-kept==1.0\n"}})
    git(repo, "checkout", "-q", "main")
    return {"repo": repo,
            "main": venv_with(root / "main", wheels, ["tuc-kept==1.0", "tuc-gone==1.0"]),
            "adds": venv_with(root / "adds", wheels, ["tuc-kept==1.0", "tuc-gone==1.0", "tuc-new==1.0"]),
            "drops": venv_with(root / "drops", wheels, ["tuc-kept==1.0"])}


def compare(repo: dict[str, Path | str], head: str, out: Path, venv: str = "", only: str = "imports"
            ) -> tuple[int, dict, str]:
    """compare's imports (or `only`) of main's venv against `head`'s (or `venv`'s), each side's stack read at its
    ref."""
    proc = run_cli("compare", "--baseline-python", str(repo["main"]), "--candidate-python", str(repo[venv or head]),
                   "--base-ref", "main", "--head-ref", head, "--requirements", "requirements.txt",
                   "--only", only, "--device", "cpu", "--timeout", "60", "--out", str(out), cwd=Path(repo["repo"]))
    _, cand = json.loads((out / "report.json").read_text())["reports"]
    return proc.returncode, {r["id"]: r for r in cand["results"]}[f"stack[-]/{only}"], proc.stdout + proc.stderr


def test_a_module_only_the_candidates_stack_has_fails_as_new(repo: dict[str, Path | str], tmp_path: Path) -> None:
    code, result, log = compare(repo, "adds", tmp_path / "out")
    assert code == 1 and result["outcome"] == "failed", log
    assert result["reason"].startswith(
        "1 module new in the candidate's stack (not installed with baseline 2.13.0+cpu) does not import: tuc_new "
        f"(tuc-new 1.0) raised: {NEW_ERROR}"), result["reason"]
    assert "too" not in result["reason"], result["reason"]  # never "fails with the baseline too": it was not there
    assert result["metrics"]["new"] == ["tuc_new"] and result["metrics"]["also_on_baseline"] == []


def test_a_package_the_pull_request_removed_is_reported_not_failed(repo: dict[str, Path | str], tmp_path: Path) -> None:
    code, result, log = compare(repo, "drops", tmp_path / "out")
    assert code == 0 and result["outcome"] == "passed", log
    assert result["reason"].endswith(
        "; 2 not installed here, removed by the team's pull request (not judged): tuc_gone (tuc-gone 1.0); "
        "tuc_gone_dep (tuc-gone-dep 1.0, with tuc-gone)"), result["reason"]
    assert result["metrics"]["removed_by_team"] == ["tuc_gone", "tuc_gone_dep"] and result["metrics"]["gone"] == []
    assert "2 distributions the baseline has are removed by the team's pull request (its requirements drop tuc-gone)" \
        in log


def test_a_a_passes_and_a_package_gone_unasked_still_fails(repo: dict[str, Path | str], tmp_path: Path) -> None:
    code, result, log = compare(repo, "main", tmp_path / "aa")
    assert code == 0 and result["outcome"] == "passed", log
    assert result["reason"].startswith("every module that imports with baseline 2.13.0+cpu imports here ("), result
    # tuc-gone missing while the pull request's requirements still ask for it: not the team's doing, so it fails
    code, result, log = compare(repo, "main", tmp_path / "unasked", venv="drops")
    assert code == 1 and result["outcome"] == "failed", log
    assert re.match(r"2 of \d+ modules that import with baseline 2\.13\.0\+cpu do not here: tuc_gone \(tuc-gone 1\.0\) "
                    r"is no longer installed; tuc_gone_dep \(tuc-gone-dep 1\.0\) is no longer installed",
                    result["reason"]), result["reason"]
    listings = {"baseline": imports.listing(str(repo["main"])), "candidate": imports.listing(str(repo["drops"]))}
    same = ("tuc-kept==1.0", "tuc-gone==1.0")
    assert imports.removed_by_team({"baseline": same, "candidate": same}, listings) == {}
    assert imports.removed_by_team({"baseline": same, "candidate": same[:1]}, listings) == {
        "tuc-gone": "tuc-gone", "tuc-gone-dep": "tuc-gone"}


@pytest.mark.skipif(shutil.which("gcc") is None, reason="no C compiler here to build the extension")
def test_abi_fails_an_extension_only_the_candidates_stack_has_as_new(repo: dict[str, Path | str], tmp_path: Path) -> None:
    code, result, log = compare(repo, "adds", tmp_path / "out", only="abi")
    assert code == 1 and result["outcome"] == "failed", log
    assert result["reason"] == (
        "1 of 1 shared objects linking torch need symbols torch 2.13.0+cpu does not export: "
        "_stale.cpython-311-x86_64-linux-gnu.so (tuc-new 1.0, new in the candidate's stack) needs "
        "c10::MessageLogger::MessageLogger(char const*, int, int)"), result["reason"]
    (missing,) = result["metrics"]["missing"].values()
    assert missing["stack"] == "new in the candidate's stack"


def test_abi_names_a_shared_object_by_the_side_whose_stack_has_it() -> None:
    """On the baseline's side, a distribution the team's pull request removed is named so (the baseline's result
    decides nothing, so this is a note); a candidate's that the baseline lacks is new."""
    env = {"baseline": abi.Environment({"torch": ("2.13.0", []), "tuc-gone": ("1.0", [])}),
           "candidate": abi.Environment({"torch": ("2.14.1", []), "tuc-new": ("1.0", [])})}
    notes = abi.stack_notes(env, {"tuc-gone": "tuc-gone"})
    assert notes == {"candidate": {"tuc-new": ", new in the candidate's stack"},
                     "baseline": {"tuc-gone": ", removed by the team's pull request"}}
    mangled = "_ZN3c103hip11tuc_removedEv"
    missing = abi.Missing("tuc-new", "1.0", "/x/_ext.so", (mangled,), (abi.demangle(mangled),))
    assert missing.says(notes["candidate"]["tuc-new"]) == (
        "_ext.so (tuc-new 1.0, new in the candidate's stack) needs c10::hip::tuc_removed()")


def test_judgement_tells_new_removed_and_gone_apart() -> None:
    """The judgement alone (torch-free): a new module that raises fails as new, a removed one is reported, one gone
    unasked still fails, one failing on both sides is listed as before."""
    def side(**statuses: str) -> dict[str, imports.Imported]:
        return {m: imports.Imported(f"tuc-{m}", "1", m, s, "" if s == "ok" else "boom") for m, s in statuses.items()}

    done = {"baseline": side(kept="ok", gone="ok", dep="ok", lost="ok", old="error"),
            "candidate": side(kept="ok", new="error", old="error")}
    cand = imports.judge_sides(done, device="cpu", repro="", baseline_label="2.13.0",
                         removed={"tuc-gone": "tuc-gone", "tuc-dep": "tuc-gone"})["candidate"]
    assert cand.outcome.value == "failed"
    assert cand.reason == (
        "1 of 5 modules that import with baseline 2.13.0 do not here: lost (tuc-lost 1) is no longer installed; "
        "1 module new in the candidate's stack (not installed with baseline 2.13.0) does not import: new (tuc-new 1) "
        "raised: boom; 1 fail with baseline 2.13.0 too: old (tuc-old 1) raised: boom; 2 not installed here, removed "
        "by the team's pull request (not judged): dep (tuc-dep 1, with tuc-gone); gone (tuc-gone 1)")
    assert (cand.metrics["new"], cand.metrics["gone"], cand.metrics["removed_by_team"]) == (["new"], ["lost"],
                                                                                          ["dep", "gone"])
