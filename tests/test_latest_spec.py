"""`latest` as a torch SPEC: the newest release on the index, pre-releases (nightlies, release candidates) passed over."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import yaml
from conftest import run_cli

from torch_upgrade_check.orchestrate import provision

CANARY = Path(__file__).resolve().parents[1] / "workflows" / "torch-canary.yml"
# the test machines' pip sources may hold a real torch 2.14.1 (a 5.5 GB CUDA build): no version here is 2.14.1
VERSIONS = ["2.12.0", "2.13.1", "2.14.0rc1", "2.14.1.dev20261201"]


def test_latest_installs_the_newest_release_on_the_index_and_names_it(tmp_path: Path, torch_python: str) -> None:
    """A local index holding two releases, a release candidate and a nightly: `--candidate latest` installs 2.13.1
    (the newest release; the RC and the nightly are pre-releases) into the venv store, and the report names it."""
    from harness.nightlies import nightly_index

    url = nightly_index(torch_python, tmp_path / "index", VERSIONS, fault_from=None)
    args = ["compare", "--candidate", "latest", "--only", "mlp[float32]/numerics", "--index-url", url,
            "--torch-backend", "pypi", "--installer", "pip", "--venv-dir", str(tmp_path / "venvs"), "--device", "cpu",
            "--threads", "1", "--no-job-summary"]
    proc = run_cli(*args, "--out", str(tmp_path / "night-1"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    assert "torch 2.13.1 installed in" in proc.stdout, proc.stdout[-2000:]
    doc = json.loads((tmp_path / "night-1" / "report.json").read_text())
    assert (doc["label"], doc["environment"]["torch_version"]) == ("2.13.1", "2.13.1")
    assert [r["outcome"] for r in doc["results"]] == ["passed"], doc["results"]
    # a new release on the index: the stored `latest` venv is stale (the index is asked), and 2.13.2 is installed
    nightly_index(torch_python, tmp_path / "index", [*VERSIONS, "2.13.2"], fault_from=None)
    again = run_cli(*args, "--out", str(tmp_path / "night-2"))
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr
    assert "torch 2.13.2 installed in" in again.stdout, again.stdout[-2000:]
    assert json.loads((tmp_path / "night-2" / "report.json").read_text())["label"] == "2.13.2"


def test_latest_is_a_moving_spec_from_the_stable_channel() -> None:
    """`latest` is re-resolved like a channel (its venv is rebuilt when the index has a newer release) and comes from
    PyTorch's stable index, not a pre-release channel."""
    spec = provision.parse_spec("latest", "--candidate")
    assert (spec.kind, spec.requirement, spec.pre) == ("latest", "torch", False)
    assert provision.index_for("cpu", spec, None) == f"{provision.PYTORCH_INDEX}/cpu"
    assert "latest" in provision.MAX_AGE_DAYS


def test_latest_that_is_the_pin_stops_compare_and_the_canary_reads_no_new_build(tmp_path: Path,
                                                                                 torch_python: str) -> None:
    """`--baseline auto` pinning 2.13.1 and `--candidate latest` on an index whose newest release is 2.13.1: compare
    stops with exit 2 (nothing would be compared), and its report, both sides torch 2.13.1, is what the canary's
    history step reads as a night with no new build (its own check, taken from workflows/torch-canary.yml, run on it)."""
    from harness.nightlies import nightly_index

    url = nightly_index(torch_python, tmp_path / "index", ["2.12.0", "2.13.1"], fault_from=None)
    team = tmp_path / "team"
    team.mkdir()
    (team / "requirements.txt").write_text("torch==2.13.1\n")
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm",
                                                 "the pin"]):
        subprocess.run(["git", *args], cwd=team, check=True, capture_output=True)
    out = tmp_path / "out"
    proc = run_cli("compare", "--baseline", "auto", "--base-ref", "HEAD", "--candidate", "latest", "--requirements",
                   "requirements.txt", "--only", "mlp[float32]/numerics", "--index-url", url, "--torch-backend", "pypi",
                   "--installer", "pip", "--venv-dir", str(tmp_path / "venvs"), "--device", "cpu", "--threads", "1",
                   "--out", str(out), "--no-job-summary", cwd=team)
    assert proc.returncode == 2 and "nothing would be compared" in proc.stderr, proc.stdout[-2000:] + proc.stderr
    history_step = next(s for s in yaml.safe_load(CANARY.read_text())["jobs"]["canary"]["steps"] if s.get("id") == "history")
    check = history_step["run"].split("same_torch='", 1)[1].split("'\n", 1)[0]
    same = subprocess.run([torch_python, "-c", check, str(out / "report.json")], check=False, capture_output=True,
                          text=True)
    assert (same.returncode, same.stdout.strip()) == (0, "2.13.1"), same
