"""torch spec parsing and environment provisioning rules: pure functions, no torch."""

from __future__ import annotations

from pathlib import Path

import pytest

from torch_upgrade_check.errors import UsageError
from torch_upgrade_check.orchestrate import provision


@pytest.mark.parametrize(("text", "kind", "requirement"), [
    ("2.13.0", "version", "torch==2.13.0"),
    ("2.14.0.dev20261120", "version", "torch==2.14.0.dev20261120"),
    (">=2.12,<2.14", "range", "torch>=2.12,<2.14"),
    ("nightly", "nightly", "torch"),
    ("test", "test", "torch"),
    ("current", "current", ""),
])
def test_specs(text: str, kind: str, requirement: str) -> None:
    spec = provision.parse_spec(text, "--candidate")
    assert (spec.kind, spec.requirement) == (kind, requirement)


@pytest.mark.parametrize("text", ["banana", "2.13.0; rm -rf /", "torch==2.13", ""])
def test_bad_specs_name_the_flag_and_the_forms(text: str) -> None:
    with pytest.raises(UsageError, match=r"--candidate must be a torch version like 2\.13\.0"):
        provision.parse_spec(text, "--candidate")


def test_backends_and_indexes() -> None:
    assert provision.check_backend("cu128") == "cu128"
    with pytest.raises(UsageError, match=r"--torch-backend must be"):
        provision.check_backend("cuda12")
    release = provision.parse_spec("2.13.0", "x")
    nightly = provision.parse_spec("nightly", "x")
    assert provision.index_for("auto", release, None, "linux") == "https://download.pytorch.org/whl/cpu"
    assert provision.index_for("auto", release, None, "darwin") == ""  # PyPI's macOS build is the CPU/MPS one
    assert provision.index_for("auto", release, (12, 9)) == "https://download.pytorch.org/whl/cu128"
    assert provision.index_for("auto", release, (13, 1)) == "https://download.pytorch.org/whl/cu130"
    assert provision.index_for("auto", nightly, None) == "https://download.pytorch.org/whl/nightly/cpu"
    assert provision.index_for("cpu", release, (12, 9)) == "https://download.pytorch.org/whl/cpu"
    assert provision.index_for("pypi", release, (12, 9)) == ""


def test_environment_names_follow_their_contents() -> None:
    base = dict(python_version="3.11.7", requirement="torch==2.13.0", backend="auto", index_url="",
                extra_index_urls=(), find_links=(), pre=False, extra_requirements=(), installer="pip",
                platform="linux-x86_64")
    a, b = provision.InstallPlan(**base), provision.InstallPlan(**{**base, "extra_requirements": ("numpy",)})
    assert a.key() == provision.InstallPlan(**base).key() and a.key() != b.key()


def test_cross_version_is_planned_for_built_ins_and_for_workloads_that_ask() -> None:
    from pathlib import Path

    from torch_upgrade_check import suite
    from torch_upgrade_check.orchestrate import compare, session

    mine = suite.Workload("mine", ("float32",), ("numerics", "latency"), factory="pkg:make")
    asks = suite.Workload("asks", ("float32",), ("numerics", "cross-version"), factory="pkg:make2")
    mlp = next(w for w in suite.BUILTIN if w.name == "mlp")
    settings = session.Settings(out=Path("out"), workloads=(mlp, mine, asks))
    specs = compare.cross_version_specs(settings, "cpu", Path("store"), "save")
    assert [s.id for s in specs] == ["mlp[float32]/cross-version", "asks[float32]/cross-version"]
    assert all(s.params["mode"] == "save" for s in specs)


def test_cross_version_can_be_selected_by_its_own_id() -> None:
    # `--only 'mlp[float32]/cross-version'` once matched nothing: --only was applied to the numerics ids first
    from torch_upgrade_check import suite
    from torch_upgrade_check.orchestrate import compare, session

    mlp = next(w for w in suite.BUILTIN if w.name == "mlp")
    for only, expected in ((("mlp[float32]/cross-version",), ["mlp[float32]/cross-version"]),
                           (("mlp[float32]/numerics",), ["mlp[float32]/cross-version"]),  # numerics brings it along
                           (("cross-version",), ["mlp[float32]/cross-version"]),
                           (("mlp[float32]/latency",), [])):
        settings = session.Settings(out=Path("out"), workloads=(mlp,), only=only)
        assert [s.id for s in compare.cross_version_specs(settings, "cpu", Path("s"), "save")] == expected, only


def test_the_worker_package_path_survives_many_threads_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # compare starts both sides' workers from threads; two threads once raced to make the same link (EEXIST)
    import tempfile
    from concurrent.futures import ThreadPoolExecutor

    from torch_upgrade_check.orchestrate import workers

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with ThreadPoolExecutor(16) as pool:
        paths = list(pool.map(lambda _: workers.package_path(), range(200)))
    assert len(set(paths)) == 1
    assert (paths[0] / "torch_upgrade_check" / "worker").is_dir()
