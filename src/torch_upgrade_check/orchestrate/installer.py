"""The installer's command lines (pip or uv) and running them: a log file each, a heartbeat, a timeout (no torch).

Every command's output goes to the side's own log file, never to the console: the console gets one line
when a step starts, a heartbeat every HEARTBEAT_S while it runs (a 2 GB CUDA wheel takes minutes, and a
silent log looks hung), and the installer's own one-line reason when it fails.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from torch_upgrade_check.orchestrate import store
from torch_upgrade_check.orchestrate.workers import InfrastructureError

HEARTBEAT_S = store.HEARTBEAT_S  # one pace for install heartbeats and lock waits
INSTALL_TIMEOUT_S = 3600
RESOLVE_TIMEOUT_S = 120
UV_VERSION = "0.13.9"  # the uv the action installs when the runner has none (action.yml pins the same)
# Projects PyTorch's index builds to match each torch build: installed with torch, from its index.
TORCH_COMPANIONS = frozenset({"torchvision", "torchaudio", "torchao", "torchdata", "torchtext", "triton",
                              "pytorch-triton", "pytorch-triton-rocm", "pytorch-triton-xpu", "fbgemm-gpu", "torchrec"})
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


class Cancelled(InfrastructureError):
    """Stopped because the other side's install failed first: its error is the one reported."""


def find_uv() -> str | None:
    """uv on PATH, else the one installed beside this tool (the action's setup step puts a pinned uv there)."""
    found = shutil.which("uv")
    if found:
        return found
    beside = Path(sys.executable).parent / ("uv.exe" if os.name == "nt" else "uv")
    return str(beside) if beside.is_file() and os.access(beside, os.X_OK) else None


def uv_cache_dir(environ: Mapping[str, str]) -> Path:
    """uv's cache: the user's UV_CACHE_DIR, else beside the venv store, so it is kept (and measured) with it."""
    if environ.get("UV_CACHE_DIR"):
        return Path(environ["UV_CACHE_DIR"])
    return store.default_venv_dir(environ).parent / "uv"


def installer_env(installer: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    environ = os.environ if environ is None else environ
    env = dict(environ)
    if installer == "uv":
        env["UV_CACHE_DIR"] = str(uv_cache_dir(environ))
    return env


def project(requirement: str) -> str:
    """`torchvision>=0.20` -> `torchvision` (PEP 503 normalised); "" when it is not a plain requirement."""
    m = _NAME.match(requirement)
    return re.sub(r"[-_.]+", "-", m.group(1)).lower() if m else ""


def split_requirements(extra: Sequence[str]) -> tuple[list[str], list[str]]:
    """(torch's companions, which come from torch's index; the rest, from the configured index)."""
    companions = [r for r in extra if project(r) in TORCH_COMPANIONS]
    return companions, [r for r in extra if project(r) not in TORCH_COMPANIONS]


def _index_options(installer: str, index_url: str, extra_index_urls: Sequence[str], find_links: Sequence[str],
                   pre: bool) -> list[str]:
    opts: list[str] = []
    if index_url:
        opts += ["--index-url", index_url] if installer == "pip" else ["--index", index_url]
    for url in extra_index_urls:
        opts += ["--extra-index-url", url]
    for link in find_links:
        opts += ["--find-links", link]
    if pre:
        opts += ["--pre"] if installer == "pip" else ["--prerelease", "allow"]
    return opts


def install_commands(installer: str, python: str, *, requirement: str, index_url: str,
                     extra_index_urls: Sequence[str], find_links: Sequence[str], pre: bool,
                     extra_requirements: Sequence[str], uv: str = "uv") -> list[tuple[list[str], list[str]]]:
    """[(command, requirements)]: torch (with its companions) from `index_url`; then, when torch came from an
    index of its own, the other extra requirements from the configured index in a second call (the caller
    appends `torch==<installed>` to that one, so nothing there can swap torch)."""
    def command(opts: list[str], reqs: list[str]) -> tuple[list[str], list[str]]:
        if installer == "uv":
            # compiled at install, as pip does: a venv is complete when published, never written to by the runs
            # that import from it, and its imports are fast from the first run (also under PYTHONDONTWRITEBYTECODE)
            return [uv, "pip", "install", "--compile-bytecode", "--python", python, *opts, *reqs], reqs
        return [python, "-m", "pip", "install", "--disable-pip-version-check", *opts, *reqs], reqs

    companions, others = split_requirements(extra_requirements)
    if not index_url:
        opts = _index_options(installer, "", extra_index_urls, find_links, pre)
        return [command(opts, [requirement, *extra_requirements])]
    first = command(_index_options(installer, index_url, extra_index_urls, find_links, pre), [requirement, *companions])
    if not others:
        return [first]
    return [first, command(_index_options(installer, "", extra_index_urls, find_links, False), others)]


def create_command(installer: str, base_python: str, env_dir: Path, uv: str = "uv") -> list[str]:
    if installer == "uv":
        return [uv, "venv", "--quiet", "--seed", "--python", base_python, str(env_dir)]
    return [base_python, "-m", "venv", str(env_dir)]


def run_logged(cmd: list[str], log: Path, what: str, *, say: Callable[[str], None],
               heartbeat_s: float = HEARTBEAT_S, timeout_s: float = INSTALL_TIMEOUT_S,
               cancel: threading.Event | None = None, env: Mapping[str, str] | None = None) -> float:
    """Run `cmd` with its output appended to `log`; say "still <what>" every `heartbeat_s`. Returns the seconds it
    took. A failure raises InfrastructureError with the installer's own one-line reason and the log's path."""
    log.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with log.open("a", encoding="utf-8") as f:
        f.write(f"$ {' '.join(cmd)}\n")
        f.flush()
        try:
            proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=None if env is None else dict(env))
        except OSError as e:
            raise InfrastructureError(f"{what} could not start: {e.strerror or e}") from None
        beat = min(heartbeat_s, 1.0)  # poll often (for a cancel), speak every heartbeat_s
        next_note = start + heartbeat_s
        while True:
            try:
                proc.wait(timeout=beat)
                break
            except subprocess.TimeoutExpired:
                now = time.monotonic()
                if cancel is not None and cancel.is_set():
                    _stop(proc)
                    raise Cancelled(f"{what} was stopped: the other side's install failed") from None
                if now - start > timeout_s:
                    _stop(proc)
                    raise InfrastructureError(f"{what} took over {timeout_s:.0f}s and was stopped; see {log}") from None
                if now >= next_note:
                    say(f"still {what} ({now - start:.0f} s; log: {log})")
                    next_note += heartbeat_s
    if proc.returncode != 0:
        raise InfrastructureError(f"{what} failed: {installer_message(log)} (full log: {log})")
    return time.monotonic() - start


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def installer_message(log: Path) -> str:
    """The installer's own one-line reason, e.g. pip's 'No matching distribution found for torch==2.99.0'."""
    lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    for pattern in ("No matching distribution", "Cannot install", "No solution found", "ERROR:", "error:", "× "):
        hits = [i for i, ln in enumerate(lines) if pattern in ln]
        if hits:
            i = hits[-1]
            causes = [ln for ln in lines[i + 1 : i + 6] if ln.startswith("The user requested") or ln.startswith("╰─▶")]
            return "; ".join([lines[i], *causes])[:400]
    return lines[-1][:400] if lines else "no output"


def installed_version(python: str, name: str = "torch") -> str:
    """The version of `name` installed for `python` (from its metadata; torch is not imported)."""
    code = f"import importlib.metadata as m; print(m.version({name!r}))"
    proc = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    if proc.returncode != 0:
        raise InfrastructureError(f"{name} is not installed for {python}: {(proc.stderr.strip().splitlines() or ['?'])[-1]}")
    return proc.stdout.strip()


def resolve_version(installer: str, python: str, *, requirement: str, index_url: str,
                    extra_index_urls: Sequence[str], find_links: Sequence[str], pre: bool, uv: str = "uv",
                    env: Mapping[str, str] | None = None) -> str | None:
    """The torch version the installer would pick for `requirement` now (a dry run: nothing is downloaded but
    the index pages and metadata), or None when it cannot tell (offline, an index down, an old pip)."""
    opts = _index_options(installer, index_url, extra_index_urls, find_links, pre)
    if installer == "uv":
        cmd = [uv, "pip", "compile", "-", "--no-deps", "--no-header", "--no-annotate", "--quiet",
               "--refresh-package", "torch", "--python", python, *opts]
    else:
        cmd = [python, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--no-deps", "--quiet",
               "--disable-pip-version-check", "--report", "-", *opts, requirement]
    try:
        proc = subprocess.run(cmd, input=requirement + "\n" if installer == "uv" else None, capture_output=True,
                              text=True, timeout=RESOLVE_TIMEOUT_S, check=False,
                              env=None if env is None else dict(env))
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    if installer == "uv":
        m = re.search(r"^torch==(\S+)", proc.stdout, re.MULTILINE)
        return m.group(1) if m else None
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        return None
    versions = [i.get("metadata", {}).get("version") for i in report.get("install", [])
                if project(str(i.get("metadata", {}).get("name", ""))) == "torch"]
    return versions[0] if versions and versions[0] else None
