"""The resolve check: pip's dry-run report read with packaging; real packages from the index where it counts."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest
from conftest import run_cli

from torch_upgrade_check.aspects.resolve import host as resolve

PIP = [sys.executable, "-m", "pip"]


def _item(name: str, version: str, requires: list[str], extras: list[str] | None = None) -> dict:
    return {"metadata": {"name": name, "version": version, "requires_dist": requires},
            "requested_extras": extras or []}


REPORT = {
    "version": "1",
    "environment": {"python_version": "3.11", "sys_platform": "linux", "platform_machine": "x86_64",
                    "implementation_name": "cpython", "platform_system": "Linux", "os_name": "posix",
                    "python_full_version": "3.11.7", "platform_python_implementation": "CPython"},
    "install": [
        _item("torch", "2.13.0+cpu", ["sympy>=1.13.3", "filelock"]),
        _item("Torch_Vision", "0.28.0", ["torch==2.13.0", "numpy"]),
        _item("torchao", "0.15.0", ["torch>=2.12; extra == 'dev'"]),  # only with an extra nobody asked for
        _item("lightning", "2.6.0", ["torch<3,>=2.1"]),
        _item("sympy", "1.13.3", ["mpmath"]),
        _item("numpy", "2.1.3", []),
    ],
}


def test_the_report_names_who_refuses_the_candidate_and_why() -> None:
    reference = resolve.read_report(REPORT)
    assert reference.versions["torch-vision"] == "0.28.0"
    assert resolve.refusals(reference, "2.14.1") == [("torch-vision", "0.28.0", "torch==2.13.0")]
    assert resolve.refusals(reference, "2.13.0+cpu") == []  # a local label is not part of the pin


def test_the_candidates_own_requirements_against_the_stacks_pins() -> None:
    torch_meta = resolve.read_report({"environment": REPORT["environment"],
                                      "install": [_item("torch", "2.14.1", ["sympy>=1.14", "filelock"])]})
    assert resolve.unmet_by_stack(torch_meta, ["sympy==1.13.3", "numpy"]) == [("sympy", "sympy==1.13.3", "sympy>=1.14")]
    assert resolve.unmet_by_stack(torch_meta, ["sympy<1.14"]) == [("sympy", "sympy<1.14", "sympy>=1.14")]
    assert resolve.unmet_by_stack(torch_meta, ["sympy>=1.13", "sympy<=1.14"]) == []  # the stack lets it move


def test_changes_list_every_package_but_torch() -> None:
    assert resolve.changes({"torch": "2.13.0", "torchvision": "0.28.0", "old": "1.0", "same": "1"},
                           {"torch": "2.14.1", "torchvision": "0.29.1", "new": "2.0", "same": "1"}) == [
        "new (new) 2.0", "old 1.0 (gone)", "torchvision 0.28.0 -> 0.29.1"]


# Real packages from the index: torchvision 0.28.0 requires torch==2.13.0 exactly. pip resolves from metadata:
# torch 2.14.1 (5.5 GB with its CUDA wheels) is never downloaded or installed.

@pytest.mark.slow
def test_a_companion_pinned_to_the_baseline_fails_resolve_before_any_install(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("torchvision==0.28.0\n")
    proc = run_cli("compare", "--baseline", "2.13.0", "--candidate", "2.14.1", "--installer", "pip",
                   "--torch-backend", "pypi", "--venv-dir", str(tmp_path / "venvs"), "--device", "cpu",
                   "--requirements", str(tmp_path / "requirements.txt"), "--out", str(tmp_path / "out"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    baseline, candidate = json.loads((tmp_path / "out" / "report.json").read_text())["reports"]
    result = candidate["results"][0]
    assert result["id"] == "stack[-]/resolve" and result["outcome"] == "failed"
    assert result["reason"].startswith("the stack does not resolve with torch 2.14.1: torchvision 0.28.0 requires "
                                       "torch==2.13.0; torchvision 0.29."), result["reason"]
    assert re.search(r"torchvision 0\.29\.\d+ accepts torch 2\.14\.1", result["reason"])
    assert baseline["results"][0]["outcome"] == "passed" and candidate["label"] == "2.14.1"
    assert not (tmp_path / "venvs").exists()  # nothing was installed, for either side
    logs = "".join(p.read_text() for p in (tmp_path / "out" / "logs").glob("resolve-*.log"))
    assert "Downloading torch-" not in logs and "Collecting torch==2.14.1" not in logs.replace("Processing", "")


@pytest.mark.slow
def test_a_a_resolves_alike_and_a_companion_bump_is_listed(tmp_path: Path) -> None:
    same = [resolve.Side(role, "torch==2.13.0", resolve.Index(), "2.13.0") for role in ("baseline", "candidate")]
    results = resolve.check(same, ["torchvision==0.28.0"], PIP, tmp_path / "aa", device="cpu", repro="")
    assert [r.outcome.value for r in results.values()] == ["passed", "passed"]
    assert results["candidate"].metrics["changed"] == []
    assert "every package resolves as with the baseline's torch" in results["candidate"].reason
    bump = [resolve.Side("baseline", "torch==2.13.0", resolve.Index(), "2.13.0"),
            resolve.Side("candidate", "torch==2.14.1", resolve.Index(), "2.14.1")]
    results = resolve.check(bump, ["torchvision"], PIP, tmp_path / "ab", device="cpu", repro="")
    cand = results["candidate"]
    assert cand.outcome.value == "passed", cand.reason
    assert any(re.fullmatch(r"torchvision 0\.28\.0 -> 0\.29\.\d+", line) for line in cand.metrics["changed"]), cand.reason


def test_changes_the_team_pinned_are_told_apart_from_the_resolvers() -> None:
    team = resolve.pinned_by_team(["torchvision==0.28.0", "timm==1.0.31", "Pillow"],
                                  ["torchvision==0.29.1", "timm==1.0.31", "pillow", "fastapi"])
    assert team == {"torchvision", "fastapi"}  # names compared as pip does; the same requirement is no change
    pinned, unasked = resolve.split_changes({"torchvision": "0.28.0", "numpy": "2.1.3", "timm": "1.0.31"},
                                            {"torchvision": "0.29.1", "numpy": "2.2.0", "timm": "1.0.31",
                                             "fastapi": "0.115.0"}, team)
    assert pinned == ["fastapi (new) 0.115.0", "torchvision 0.28.0 -> 0.29.1"]
    assert unasked == ["numpy 2.1.3 -> 2.2.0"]


@pytest.mark.slow
def test_each_side_resolves_its_own_stack_and_the_bump_is_the_teams(tmp_path: Path) -> None:
    sides = [resolve.Side("baseline", "torch==2.13.0", resolve.Index(), "2.13.0", ("torchvision==0.28.0",)),
             resolve.Side("candidate", "torch==2.14.1", resolve.Index(), "2.14.1", ("torchvision==0.29.1",))]
    results = resolve.check(sides, [], PIP, tmp_path, device="cpu", repro="")
    cand = results["candidate"]
    assert [r.outcome.value for r in results.values()] == ["passed", "passed"], cand.reason
    assert cand.metrics["pinned"] == ["torchvision 0.28.0 -> 0.29.1"], cand.metrics
    assert "torchvision 0.28.0 -> 0.29.1" not in cand.metrics["unasked"]
    assert "1 changed by the team's requirements: torchvision 0.28.0 -> 0.29.1" in cand.reason
    assert "torchvision 0.28.0 -> 0.29.1 (the team's requirements)" in cand.details


def test_an_index_the_runner_cannot_reach_is_the_runners_failure_not_the_stacks(tmp_path: Path) -> None:
    # a package on no local index, from an index on a closed loopback port: pip retries (as it does by default,
    # 5 times), then says no version was found; its log says why (the connection): the runner's network
    env = {**os.environ, "PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_RETRIES": "1", "PIP_TIMEOUT": "2"}
    got = resolve.dry_run(PIP, ["tuc-no-such-package-anywhere"], resolve.Index(), log=tmp_path / "down.log", env=env)
    assert not got.ok and got.runner, (got.reason, (tmp_path / "down.log").read_text()[-2000:])
    conflict = tmp_path / "conflict.log"
    conflict.write_text("ERROR: Cannot install torch==2.13.0 and torchvision==0.29.1 because these package versions "
                        "have conflicting dependencies.\nERROR: ResolutionImpossible: for help visit ...\n")
    assert not resolve.runner_caused(conflict)


def test_a_torch_the_index_does_not_have_is_the_teams_input_naming_version_and_index(tmp_path: Path) -> None:
    """No stack: the install of torch 2.13.7 (a typo) fails, and the index's answer names it (exit 2, not exit 3)."""
    proc = run_cli("compare", "--candidate", "2.13.7", "--torch-backend", "pypi", "--installer", "pip", "--device", "cpu",
                   "--venv-dir", str(tmp_path / "venvs"), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = proc.stderr.strip().splitlines()[0]
    assert line.startswith("torch-upgrade-check: error: the candidate's torch 2.13.7 is not on PyPI (or the index pip "
                           "is configured with): "), proc.stderr
    assert "pass a torch version that index has" in line and "Traceback" not in proc.stderr


def _wheel(folder: Path, name: str, version: str, requires: list[str]) -> None:
    """A real wheel of a companion (metadata only), for pip to read from --find-links."""
    import zipfile

    info = f"{name.replace('-', '_')}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(f"Requires-Dist: {r}\n" for r in requires)
    with zipfile.ZipFile(folder / f"{name.replace('-', '_')}-{version}-py3-none-any.whl", "w") as z:
        z.writestr(f"{info}/METADATA", meta)
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", "")


@pytest.mark.slow
def test_a_companion_with_no_release_for_the_candidate_names_its_newest_and_the_torch_it_requires(tmp_path: Path) -> None:
    links = tmp_path / "links"
    links.mkdir()
    _wheel(links, "tuc-team-ext", "1.0", ["torch==2.13.0"])
    _wheel(links, "tuc-team-ext", "1.1", ["torch<2.14,>=2.12"])
    index = resolve.Index(find_links=(str(links),))
    sides = [resolve.Side("baseline", "torch==2.13.0", index, "2.13.0"),
             resolve.Side("candidate", "torch==2.14.1", index, "2.14.1")]
    results = resolve.check(sides, ["tuc-team-ext"], PIP, tmp_path / "logs", device="cpu", repro="")
    cand = results["candidate"]
    assert results["baseline"].outcome.value == "passed" and cand.outcome.value == "failed", cand.reason
    assert ("no tuc-team-ext release on the index accepts torch 2.14.1: the newest, tuc-team-ext 1.1, requires "
            "torch<2.14,>=2.12") in cand.reason, cand.reason


@pytest.mark.slow
def test_a_typo_in_the_pull_requests_torch_pin_is_named_not_blamed_on_torchvision(tmp_path: Path) -> None:
    from team_repo import branched

    repo = branched(tmp_path / "repo", {"requirements.txt": "torch==2.13.0\ntorchvision==0.28.0\n"},
                    {"typo": {"requirements.txt": "torch==2.13.7\ntorchvision==0.28.0\n"}})  # bump 2.13.0 -> 2.13.7
    proc = run_cli("compare", "--baseline", "auto", "--base-ref", "main", "--candidate", "auto", "--installer", "pip",
                   "--torch-backend", "pypi", "--requirements", "requirements.txt", "--venv-dir", str(tmp_path / "venvs"),
                   "--device", "cpu", "--out", str(tmp_path / "out"), cwd=repo)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = proc.stderr.strip().splitlines()[0]
    assert "the candidate's torch 2.13.7 is not on PyPI (or the index pip is configured with)" in line, proc.stderr
    assert "torchvision" not in line.split("(log:")[0]
    assert not (tmp_path / "venvs").exists()
