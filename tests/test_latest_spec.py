"""`latest` as a torch SPEC: the newest release on the index, pre-releases (nightlies, release candidates) passed over."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_cli

from torch_upgrade_check.orchestrate import provision

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
