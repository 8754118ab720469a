"""One virtual environment per torch spec, kept in the venv store (store.py) and reused while it matches.

Installer: uv when available (on PATH, or the pinned one the action installs beside this tool), else pip.
Index per platform and backend (`index_for`), the same for pip and uv:
- `auto`: with an NVIDIA driver (Linux), the PyTorch CUDA index matching the driver; without one, PyTorch's
  CPU index on Linux and Windows (PyPI's default Linux build is the CUDA one, with ~3 GB of nvidia-* wheels);
  on macOS the installer's own index (PyPI's macOS wheels are the CPU/MPS build).
- `pypi`: the installer's configured index, whatever the platform.
- `cpu`, `cu126`, `cu128`, `cu130`, `rocm6.4`, ...: that PyTorch index.
`nightly` and `test` (release candidates) use the matching PyTorch channel with pre-releases on.
`latest` is the newest release on the index (the stable channel, pre-releases off), resolved as the others are.

PyTorch's index replaces the configured one for torch (pip `--index-url`, uv `--index` with uv's
first-index rule), never an `--extra-index-url` beside PyPI: pip takes the highest version found on any
index, which is how a `torchtriton` uploaded to PyPI won over PyTorch's own nightly in December 2022.
Extra requirements then come in a second installer call from the configured index, with torch pinned to
what was installed; torch's companions (torchvision, torchaudio, triton, ...) go with torch, from its index.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from torch_upgrade_check.errors import UsageError
from torch_upgrade_check.orchestrate import installer, store
from torch_upgrade_check.orchestrate.workers import InfrastructureError

PYTORCH_INDEX = "https://download.pytorch.org/whl"
BACKEND_RE = re.compile(r"^(auto|pypi|cpu|cu\d{3}|rocm\d+\.\d+(\.\d+)?|xpu)$")
VERSION_RE = re.compile(r"^\d+\.\d+(\.\d+)?([.-]?(a|b|rc|dev|post)\d+)*(\+[\w.]+)?$")
RANGE_RE = re.compile(r"^(\s*(==|!=|<=|>=|<|>|~=)\s*\d+(\.\d+)*(\.\*)?\s*,?)+$")
NIGHTLY_MAX_AGE_DAYS = 7
# How old a venv of a moving spec may get when the index cannot be asked what it would install now.
MAX_AGE_DAYS = {"nightly": 1.0, "test": 3.0, "latest": 3.0, "range": 7.0}
# CUDA builds PyTorch publishes, newest first, with the lowest driver CUDA version each needs.
CUDA_BUILDS = (("cu130", (13, 0)), ("cu128", (12, 8)), ("cu126", (12, 6)), ("cu118", (11, 8)))


@dataclass(frozen=True)
class TorchSpec:
    """What the user asked for: `kind` is version, range, nightly, test, latest or current."""

    text: str
    kind: str
    requirement: str  # what goes to the installer, e.g. "torch==2.13.0"; "" for current

    @property
    def pre(self) -> bool:
        return self.kind in ("nightly", "test")


def parse_spec(text: str, flag: str) -> TorchSpec:
    s = text.strip()
    if s == "current":
        return TorchSpec(s, "current", "")
    if s in ("nightly", "test", "latest"):  # latest: the newest release on the index (a moving spec, like a channel)
        return TorchSpec(s, s, "torch")
    if VERSION_RE.match(s):
        return TorchSpec(s, "version", f"torch=={s}")
    if RANGE_RE.match(s):
        return TorchSpec(s, "range", f"torch{s.replace(' ', '')}")
    raise UsageError(f"{flag} must be a torch version like 2.13.0, a range like '>=2.12,<2.14', nightly, test, "
                     f"latest or current, got {text!r}")


def check_backend(backend: str) -> str:
    if not BACKEND_RE.match(backend):
        raise UsageError(f"--torch-backend must be auto, pypi, cpu, cuXYZ (like cu128), rocmX.Y or xpu, got {backend!r}")
    return backend


@dataclass(frozen=True)
class InstallPlan:
    """Everything that decides an environment's contents; its hash names the environment."""

    python_version: str
    requirement: str
    backend: str
    index_url: str
    extra_index_urls: tuple[str, ...]
    find_links: tuple[str, ...]
    pre: bool
    extra_requirements: tuple[str, ...]
    installer: str
    platform: str  # e.g. linux-x86_64: a venv is never shared between machines of another kind (a restored cache)

    def key(self) -> str:
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:12]


def this_platform() -> str:
    return f"{sys.platform}-{platform.machine().lower()}"


def detect_cuda_driver() -> tuple[int, int] | None:
    """The CUDA version the NVIDIA driver supports, from nvidia-smi; None without a driver."""
    if not sys.platform.startswith("linux") or shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=30, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"CUDA Version:\s*(\d+)\.(\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else None


def index_for(backend: str, spec: TorchSpec, driver: tuple[int, int] | None, system: str | None = None) -> str:
    """The index URL for torch, or "" for the installer's configured index. The same for pip and uv."""
    system = sys.platform if system is None else system
    channel = {"nightly": "/nightly", "test": "/test"}.get(spec.kind, "")
    if backend == "pypi":
        return ""
    if backend == "auto":
        build = next((b for b, need in CUDA_BUILDS if driver is not None and driver >= need), None)
        if build:
            return f"{PYTORCH_INDEX}{channel}/{build}"
        if system == "darwin" and not channel:
            return ""  # PyPI's macOS wheels are the CPU/MPS build; PyTorch's channels are not on PyPI
        return f"{PYTORCH_INDEX}{channel}/cpu"  # no usable driver: never PyPI's Linux default, the CUDA build
    return f"{PYTORCH_INDEX}{channel}/{backend}"


def choose_installer(requested: str) -> str:
    if requested not in ("auto", "uv", "pip"):
        raise UsageError(f"--installer must be auto, uv or pip, got {requested!r}")
    if requested == "auto":
        return "uv" if installer.find_uv() else "pip"
    if requested == "uv" and not installer.find_uv():
        raise UsageError("--installer uv was asked but uv is neither on PATH nor beside this tool; install uv or use "
                         "--installer pip")
    return requested


def venv_python(env_dir: Path) -> Path:
    return env_dir / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def python_version(python: str) -> str:
    try:
        out = subprocess.run([python, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
                             capture_output=True, text=True, timeout=60, check=False)
    except OSError as e:
        raise InfrastructureError(f"cannot run interpreter {python}: {e.strerror or e}") from None
    if out.returncode != 0:
        raise InfrastructureError(f"interpreter {python} does not run: {out.stderr.strip()[-300:]}")
    return out.stdout.strip()


@dataclass(frozen=True)
class Options:
    """How both sides' venvs are made: the install flags, where the venvs live, where the logs go."""

    base_python: str
    root: Path  # the venv store (store.store_root)
    backend: str
    index_url: str
    extra_index_urls: tuple[str, ...]
    find_links: tuple[str, ...]
    extra_requirements: tuple[str, ...]
    installer: str
    logs: Path
    heartbeat_s: float = installer.HEARTBEAT_S


@dataclass(frozen=True)
class Prepared:
    """One side's interpreter, ready: how it came to be (reused or installed, and in how long)."""

    python: str
    record: dict[str, Any]
    reused: bool
    seconds: float
    lease: store.Lease | None = None

    def outcome(self) -> str:
        torch_version = self.record.get("torch", {}).get("version", "?")
        if self.lease is None:
            return f"torch of {self.python} (nothing installed)"
        if self.reused:
            return f"torch {torch_version} reused from {self.lease.path} ({self.seconds:.1f} s)"
        return f"torch {torch_version} installed in {self.seconds:.0f} s into {self.lease.path}"


def staleness(spec: TorchSpec, path: Path, record: dict[str, Any], *, latest: Callable[[], str | None],
              now: float | None = None) -> str:
    """Why a stored venv must not be reused, or "" to reuse it.

    A version is pinned: its venv never goes stale. A nightly, a release candidate (`test`) or a range moves:
    the installer is asked (a dry run, `latest`) which torch it would install now, and a venv with another
    one is rebuilt, so a canary tests today's nightly and the newest RC, not the first one it saw. When the
    index cannot be asked (offline, down), a maximum age stands in: MAX_AGE_DAYS per kind.
    """
    if not venv_python(path).exists():
        return "its python is missing"
    if spec.kind not in MAX_AGE_DAYS:
        return ""
    have = str(record.get("torch", {}).get("version", ""))
    found = latest()
    if found is None:
        age_days = ((time.time() if now is None else now) - float(record.get("created", 0))) / 86400
        limit = MAX_AGE_DAYS[spec.kind]
        return (f"built {age_days:.1f} days ago, and the index could not be asked for the newest {spec.text} "
                f"(a {spec.kind} venv is rebuilt after {limit:g} days then)") if age_days > limit else ""
    if found.split("+")[0] != have.split("+")[0]:
        return f"the index now has torch {found} for {spec.text} (this venv has {have or 'none'})"
    return ""


def ensure_env(spec: TorchSpec, opts: Options, *, log: Path, say: Callable[[str], None] = print,
               cancel: threading.Event | None = None) -> Prepared:
    """An environment with `spec` installed and verified, from the store when one there matches and is fresh."""
    started = time.monotonic()
    if spec.kind == "current":
        return Prepared(opts.base_python, {"spec": "current"}, True, 0.0)
    driver = detect_cuda_driver()
    plan = InstallPlan(
        python_version=python_version(opts.base_python),
        requirement=spec.requirement,
        backend=opts.backend,
        index_url=opts.index_url or index_for(opts.backend, spec, driver),
        extra_index_urls=opts.extra_index_urls,
        find_links=opts.find_links,
        pre=spec.pre,
        extra_requirements=opts.extra_requirements,
        installer=opts.installer,
        platform=this_platform(),
    )
    uv = installer.find_uv() or "uv"
    env = installer.installer_env(plan.installer)
    where = f" from {plan.index_url}" if plan.index_url else " from the installer's configured index"
    index_args = dict(index_url=plan.index_url, extra_index_urls=plan.extra_index_urls, find_links=plan.find_links,
                      pre=plan.pre)

    def latest(path: Path) -> str | None:
        return installer.resolve_version(plan.installer, str(venv_python(path)), requirement=plan.requirement,
                                         uv=uv, env=env, **index_args)

    def build(path: Path) -> dict[str, Any]:
        python = str(venv_python(path))
        say(f"installing {' '.join([plan.requirement, *plan.extra_requirements])} with {plan.installer}{where} "
            f"into {path} (log: {log})")
        run = dict(say=say, heartbeat_s=opts.heartbeat_s, cancel=cancel, env=env)
        installer.run_logged(installer.create_command(plan.installer, opts.base_python, path, uv), log,
                             "creating the venv", **run)
        steps = installer.install_commands(plan.installer, python, requirement=plan.requirement,
                                           extra_requirements=plan.extra_requirements, uv=uv, **index_args)
        for i, (cmd, reqs) in enumerate(steps):
            # the second call installs the extra requirements from the configured index: torch stays as installed
            pin = [f"torch=={installer.installed_version(python)}"] if i else []
            installer.run_logged([*cmd, *pin], log, f"installing {' '.join(reqs)}", **run)
        return {"torch": _verify(spec, python, driver), "spec": spec.text}

    name = f"torch-{re.sub(r'[^A-Za-z0-9.]+', '_', spec.text)}-{plan.key()}"
    try:
        lease = store.acquire(opts.root, name, plan=json.loads(json.dumps(asdict(plan))),  # as JSON: tuples are lists
                              stale=lambda path, record: staleness(spec, path, record, latest=lambda: latest(path)),
                              build=build, say=say, heartbeat_s=opts.heartbeat_s)
    except store.StoreError as e:
        raise InfrastructureError(f"the venv store at {opts.root}: {e}") from None
    return Prepared(str(venv_python(lease.path)), lease.record, lease.reused, time.monotonic() - started, lease)


def ensure_envs(specs: Mapping[str, TorchSpec], opts: Options, *, say: Callable[[str], None] = print,
                requirements: Mapping[str, tuple[str, ...]] | None = None) -> dict[str, Prepared]:
    """Every side's environment, built in parallel (one thread and one log file per side; each line the
    sides print starts with the side's name). `requirements` gives a side its own stack beside torch (each side's
    read at its own git ref), else `opts.extra_requirements`. The first failure stops the other side's installer
    and is raised once both threads are done."""
    lock = threading.Lock()
    cancel = threading.Event()

    def line(role: str) -> Callable[[str], None]:
        def emit(text: str) -> None:
            with lock:  # one whole line at a time: print() writes the text and its newline separately
                say(f"{role}: {text}")
        return emit

    def one(role: str, spec: TorchSpec) -> Prepared:
        try:
            own = opts if requirements is None or role not in requirements else replace(
                opts, extra_requirements=requirements[role])
            return ensure_env(spec, own, log=opts.logs / f"install-{role}.log", say=line(role), cancel=cancel)
        except BaseException:
            cancel.set()
            raise

    if len(specs) <= 1:
        return {role: one(role, spec) for role, spec in specs.items()}
    with ThreadPoolExecutor(max_workers=len(specs), thread_name_prefix="install") as pool:
        futures = {role: pool.submit(one, role, spec) for role, spec in specs.items()}
        try:
            errors = [f.exception() for f in futures.values()]
        except BaseException:  # Ctrl-C: stop both installers rather than wait for them
            cancel.set()
            raise
    first = next((e for e in errors if e is not None and not isinstance(e, installer.Cancelled)),
                 next((e for e in errors if e is not None), None))
    if first is not None:
        raise first
    return {role: f.result() for role, f in futures.items()}


def trim(root: Path, cap_gb: float, *, say: Callable[[str], None] = print) -> None:
    """Keep the store (with uv's cache, which it shares the disk with) under `cap_gb`: uv's downloaded wheels are
    pruned first (cheaper to fetch again than a venv is to rebuild), then the least recently used venvs."""
    cap = int(cap_gb * store.GB)
    uv_cache = installer.uv_cache_dir(os.environ)
    uv_bytes = store.folder_size(uv_cache) if uv_cache.is_dir() else 0
    if uv_bytes and uv_bytes + sum(e.size_bytes for e in store.entries(root)) > cap:
        uv = installer.find_uv()
        if uv:
            try:  # uv waits for its cache's lock while another job installs: then prune another time
                subprocess.run([uv, "cache", "prune", "--ci"], capture_output=True, timeout=120, check=False,
                               env=installer.installer_env("uv"))
            except (OSError, subprocess.SubprocessError) as e:
                say(f"uv's cache at {uv_cache} was not pruned: {e}")
            uv_bytes = store.folder_size(uv_cache)
    store.evict(root, cap, say=say, other_bytes=uv_bytes)


VERIFY = r"""
import json, torch
info = {"version": torch.__version__, "cuda": torch.version.cuda, "git": torch.version.git_version,
        "cuda_available": torch.cuda.is_available(), "cudnn": None, "cudnn_compiled": None}
if torch.backends.cudnn.is_available():
    info["cudnn"] = torch.backends.cudnn.version()
    try:
        info["cudnn_compiled"] = torch._C._cudnn.getCompileVersion()
    except Exception:
        pass
print(json.dumps(info))
"""


def _verify(spec: TorchSpec, python: str, driver: tuple[int, int] | None) -> dict:
    """PyTorch's own smoke-test checks: the version asked for, a CUDA build that runs, matching cuDNN, fresh nightly."""
    proc = subprocess.run([python, "-c", VERIFY], capture_output=True, text=True, timeout=600, check=False)
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or ["no output"]
        raise InfrastructureError(f"torch was installed but does not import: {tail[0][:300]}")
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    version = info["version"].split("+")[0]
    if spec.kind == "version" and version != spec.text.split("+")[0]:
        raise InfrastructureError(f"asked for torch {spec.text} but {info['version']} was installed; "
                                  "check --index-url and the installer's constraints")
    if info["cuda"] and driver is not None and not info["cuda_available"]:
        raise InfrastructureError(f"torch {info['version']} is a CUDA {info['cuda']} build that cannot use this "
                                  f"machine's driver (CUDA {driver[0]}.{driver[1]}); pick --torch-backend to match")
    compiled = info.get("cudnn_compiled")
    if info.get("cudnn") and isinstance(compiled, (list, tuple)) and len(compiled) >= 2:
        runtime = int(info["cudnn"])
        # cuDNN 9 encodes major*10000 + minor*100 + patch; cuDNN 8, major*1000 + minor*100 + patch.
        major, minor = (runtime // 10000, runtime // 100 % 100) if runtime >= 90000 else (runtime // 1000, runtime // 100 % 10)
        if (major, minor) != (compiled[0], compiled[1]):
            raise InfrastructureError(f"cuDNN runtime {major}.{minor} does not match the {compiled[0]}.{compiled[1]} "
                                      "torch was built with; a stray libcudnn is on the library path")
    if spec.kind == "nightly":
        m = re.search(r"dev(\d{8})", info["version"])
        if m:
            age = (time.time() - time.mktime(time.strptime(m.group(1), "%Y%m%d"))) / 86400
            if age > NIGHTLY_MAX_AGE_DAYS:
                raise InfrastructureError(f"the nightly installed ({info['version']}) is {age:.0f} days old: "
                                          "the index is stale or pinned; check --index-url")
    return info
