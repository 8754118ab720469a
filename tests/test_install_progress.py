"""Installs say what they do (torch-free): a foldable group, a heartbeat while a slow installer runs, the time it
took; both sides in parallel with role-prefixed lines; and which index each installer gets for torch."""

from __future__ import annotations

import io
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from torch_upgrade_check import github
from torch_upgrade_check.orchestrate import installer, provision
from torch_upgrade_check.orchestrate.workers import InfrastructureError

PY = sys.executable
CPU = "https://download.pytorch.org/whl/cpu"
CU128 = "https://download.pytorch.org/whl/cu128"


def slow(seconds: float, *, then: str = "", code: int = 0) -> list[str]:
    """A fake installer: prints, sleeps, prints, exits with `code`."""
    return [PY, "-c", f"import sys, time; print('Collecting torch', flush=True); time.sleep({seconds}); "
                      f"print({then!r}); sys.exit({code})"]


def test_a_slow_installer_gets_a_heartbeat_and_its_time(tmp_path: Path) -> None:
    lines: list[str] = []
    log = tmp_path / "install-candidate.log"
    took = installer.run_logged(slow(0.75, then="Successfully installed torch"), log, "installing torch==2.13.0",
                                say=lines.append, heartbeat_s=0.2)
    assert 0.7 <= took < 5
    beats = [line for line in lines if line.startswith("still installing torch==2.13.0 (")]
    assert 2 <= len(beats) <= 5 and all(f"log: {log}" in line for line in beats), lines
    text = log.read_text()
    assert text.startswith("$ ") and "Collecting torch" in text and "Successfully installed torch" in text


def test_a_quick_installer_says_nothing_until_done(tmp_path: Path) -> None:
    lines: list[str] = []
    installer.run_logged(slow(0), tmp_path / "log", "installing torch", say=lines.append, heartbeat_s=30)
    assert lines == []


def test_an_install_failure_carries_the_installers_own_reason(tmp_path: Path) -> None:
    log = tmp_path / "install-baseline.log"
    msg = "ERROR: No matching distribution found for torch==2.99.0"
    with pytest.raises(InfrastructureError) as e:
        installer.run_logged(slow(0, then=msg, code=1), log, "installing torch==2.99.0", say=print)
    assert str(e.value) == f"installing torch==2.99.0 failed: {msg} (full log: {log})"


def test_a_cancel_stops_the_installer(tmp_path: Path) -> None:
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    start = time.monotonic()
    with pytest.raises(installer.Cancelled):
        installer.run_logged(slow(30), tmp_path / "log", "installing torch", say=print, heartbeat_s=0.1, cancel=cancel)
    assert time.monotonic() - start < 10


def test_a_timeout_stops_the_installer(tmp_path: Path) -> None:
    with pytest.raises(InfrastructureError, match=r"installing torch took over 0s and was stopped"):
        installer.run_logged(slow(30), tmp_path / "log", "installing torch", say=print, heartbeat_s=0.1, timeout_s=0.3)


@pytest.mark.parametrize("on_github", [True, False])
def test_the_group_folds_on_github_and_is_a_plain_line_elsewhere(on_github: bool) -> None:
    out = io.StringIO()
    environ = {"GITHUB_ACTIONS": "true"} if on_github else {}
    with pytest.raises(RuntimeError), github.group("preparing baseline torch 2.12.1\nand 100%", environ=environ,
                                                    stream=out):
        print("baseline: installing", file=out)
        raise RuntimeError("install failed")  # the group is closed all the same
    if on_github:
        assert out.getvalue().splitlines() == ["::group::preparing baseline torch 2.12.1 and 100%25",
                                               "baseline: installing", "::endgroup::"]
    else:
        assert out.getvalue().splitlines() == ["preparing baseline torch 2.12.1 and 100%", "baseline: installing"]


def _fake_env(monkeypatch: pytest.MonkeyPatch, plan: dict[str, list[tuple[float, str]]],
              fail: str = "") -> list[str]:
    """provision.ensure_env replaced by a fake that says timed lines; returns the events in order."""
    events: list[str] = []

    def fake(spec: provision.TorchSpec, opts: provision.Options, *, log: Path, say: Any,
             cancel: threading.Event | None = None) -> provision.Prepared:
        role = log.stem.removeprefix("install-")
        events.append(f"start {role}")
        for delay, text in plan[role]:
            time.sleep(delay)
            if cancel is not None and cancel.is_set():
                raise installer.Cancelled(f"{role} stopped")
            say(text)
        if role == fail:
            raise InfrastructureError(f"installing torch=={spec.text} failed: no such version (full log: {log})")
        events.append(f"end {role}")
        return provision.Prepared(f"/venvs/{role}/bin/python", {"torch": {"version": spec.text}}, False, 0.1)

    monkeypatch.setattr(provision, "ensure_env", fake)
    return events


def _opts(tmp_path: Path) -> provision.Options:
    return provision.Options(PY, tmp_path / "venvs", "auto", "", (), (), (), "pip", tmp_path / "logs")


def test_both_sides_install_in_parallel_with_role_prefixed_lines(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    events = _fake_env(monkeypatch, {"baseline": [(0.05, "installing a"), (0.4, "done a")],
                                     "candidate": [(0.2, "installing b"), (0.05, "done b")]})
    lines: list[str] = []
    specs = {"baseline": provision.parse_spec("2.12.1", "x"), "candidate": provision.parse_spec("2.13.0", "x")}
    start = time.monotonic()
    ready = provision.ensure_envs(specs, _opts(tmp_path), say=lines.append)
    assert time.monotonic() - start < 0.6, "the sides ran one after the other"
    assert events[:2] == ["start baseline", "start candidate"] or events[:2] == ["start candidate", "start baseline"]
    assert lines == ["baseline: installing a", "candidate: installing b", "candidate: done b", "baseline: done a"]
    assert list(ready) == ["baseline", "candidate"] and ready["candidate"].python == "/venvs/candidate/bin/python"


def test_one_sides_failure_stops_the_other_and_is_the_error_reported(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_env(monkeypatch, {"baseline": [(0.05, "installing a")], "candidate": [(0.3, "b")] * 20}, fail="baseline")
    specs = {"baseline": provision.parse_spec("2.99.0", "x"), "candidate": provision.parse_spec("2.13.0", "x")}
    start = time.monotonic()
    with pytest.raises(InfrastructureError, match=r"installing torch==2\.99\.0 failed: no such version"):
        provision.ensure_envs(specs, _opts(tmp_path), say=print)
    assert time.monotonic() - start < 3, "the candidate's install was not stopped"


# (backend, driver, platform) -> the index torch comes from; the same table for pip and uv
INDEX_TABLE = [
    ("auto", None, "linux", CPU),            # no NVIDIA driver: PyTorch's CPU build, never PyPI's CUDA default
    ("auto", (12, 9), "linux", CU128),       # the CUDA build the driver can run
    ("auto", (11, 2), "linux", CPU),         # a driver too old for every CUDA build
    ("auto", None, "darwin", ""),            # macOS: PyPI's wheels are the CPU/MPS build
    ("auto", None, "win32", CPU),
    ("cpu", (12, 9), "linux", CPU),
    ("cu128", None, "linux", CU128),
    ("pypi", None, "linux", ""),             # asked for: the installer's configured index
]


@pytest.mark.parametrize("tool", ["pip", "uv"])
@pytest.mark.parametrize(("backend", "driver", "system", "index"), INDEX_TABLE)
def test_the_index_for_torch(tool: str, backend: str, driver: tuple[int, int] | None, system: str, index: str) -> None:
    spec = provision.parse_spec("2.13.0", "x")
    url = provision.index_for(backend, spec, driver, system)
    assert url == index
    ((cmd, reqs),) = installer.install_commands(tool, "/v/bin/python", requirement=spec.requirement, index_url=url,
                                                extra_index_urls=(), find_links=(), pre=False, extra_requirements=())
    assert reqs == ["torch==2.13.0"]
    if index:  # PyTorch's index replaces the configured one for torch: never an extra index beside PyPI
        assert cmd[cmd.index("--index-url" if tool == "pip" else "--index") + 1] == index
        assert "--extra-index-url" not in cmd
    else:
        assert not {"--index-url", "--index", "--extra-index-url"} & set(cmd)


def test_channels_use_pytorchs_index_even_on_macos() -> None:
    nightly = provision.parse_spec("nightly", "x")
    assert provision.index_for("auto", nightly, None, "darwin") == "https://download.pytorch.org/whl/nightly/cpu"
    assert provision.index_for("auto", nightly, (13, 1), "linux") == "https://download.pytorch.org/whl/nightly/cu130"
    assert provision.index_for("cpu", provision.parse_spec("test", "x"), None, "linux") == \
        "https://download.pytorch.org/whl/test/cpu"


@pytest.mark.parametrize("tool", ["pip", "uv"])
def test_extra_requirements_come_from_the_configured_index_in_a_second_call(tool: str) -> None:
    steps = installer.install_commands(tool, "/v/bin/python", requirement="torch==2.13.0", index_url=CPU,
                                       extra_index_urls=("https://mirror.example/simple",), find_links=("wheels/",),
                                       pre=False, extra_requirements=("numpy>=2", "torchvision", "PyYAML"))
    (first, first_reqs), (second, second_reqs) = steps
    assert first_reqs == ["torch==2.13.0", "torchvision"]  # companions are built per torch build: its index
    assert second_reqs == ["numpy>=2", "PyYAML"]
    assert CPU in first and CPU not in second and "--index-url" not in second and "--index" not in second
    for cmd in (first, second):  # the user's own extra indexes and wheel folders apply to both
        assert "https://mirror.example/simple" in cmd and "wheels/" in cmd


def test_without_a_torch_index_everything_goes_in_one_call() -> None:
    ((cmd, reqs),) = installer.install_commands("pip", "/v/bin/python", requirement="torch==2.13.0", index_url="",
                                                extra_index_urls=(), find_links=(), pre=True,
                                                extra_requirements=("numpy",))
    assert reqs == ["torch==2.13.0", "numpy"] and "--pre" in cmd


def test_uv_is_found_on_path_or_beside_the_tool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    bindir = tmp_path / "venv" / "bin"
    bindir.mkdir(parents=True)
    monkeypatch.setattr(sys, "executable", str(bindir / "python"))
    assert installer.find_uv() is None
    (bindir / "uv").write_text("#!/bin/sh\n")
    (bindir / "uv").chmod(0o755)
    assert installer.find_uv() == str(bindir / "uv")


def test_uvs_cache_is_kept_beside_the_store_unless_the_user_set_one(tmp_path: Path) -> None:
    assert installer.uv_cache_dir({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "torch-upgrade-check" / "uv"
    assert installer.uv_cache_dir({"UV_CACHE_DIR": "/c"}) == Path("/c")
    assert installer.installer_env("uv", {"XDG_CACHE_HOME": str(tmp_path)})["UV_CACHE_DIR"] == \
        str(tmp_path / "torch-upgrade-check" / "uv")
    assert "UV_CACHE_DIR" not in installer.installer_env("pip", {})


def _fake_wheel(folder: Path, version: str) -> None:
    import zipfile

    info = f"torch-{version}.dist-info"
    with zipfile.ZipFile(folder / f"torch-{version}-py3-none-any.whl", "w") as z:
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n")
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", "")


def test_pip_dry_run_says_which_torch_a_range_would_get_now(tmp_path: Path) -> None:
    import os

    for version in ("2.13.0", "2.14.1", "2.15.0"):
        _fake_wheel(tmp_path, version)
    # only these wheels: no configuration file, no index
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PIP_")}, "PIP_CONFIG_FILE": os.devnull,
           "PIP_NO_INDEX": "1"}
    found = installer.resolve_version("pip", PY, requirement="torch>=2.13,<2.15", index_url="", extra_index_urls=(),
                                      find_links=(str(tmp_path),), pre=False, env=env)
    assert found == "2.14.1"
    assert installer.resolve_version("pip", PY, requirement="torch>=3", index_url="", extra_index_urls=(),
                                     find_links=(str(tmp_path),), pre=False, env=env) is None


def test_uv_dry_run_is_a_compile_of_torch_alone(tmp_path: Path) -> None:
    fake = tmp_path / "uv"
    fake.write_text("#!/bin/sh\necho \"$@\" > \"$(dirname \"$0\")/args\"\ncat > /dev/null\necho 'torch==2.15.0.dev20260102+cpu'\n")
    fake.chmod(0o755)
    found = installer.resolve_version("uv", "/v/bin/python", requirement="torch", index_url=CPU, extra_index_urls=(),
                                      find_links=(), pre=True, uv=str(fake))
    assert found == "2.15.0.dev20260102+cpu"
    args = (tmp_path / "args").read_text().split()
    assert args[:3] == ["pip", "compile", "-"] and "--no-deps" in args and args[args.index("--index") + 1] == CPU
