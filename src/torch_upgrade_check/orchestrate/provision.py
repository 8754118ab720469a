"""One virtual environment per torch spec: named after its contents, reused only when its record matches.

Installer: uv when available (much faster), else pip. Index per platform and backend:
- `auto`: on Linux with an NVIDIA driver, the PyTorch CUDA index matching the driver; otherwise the
  installer's own configured index (PyPI by default: CPU wheels on macOS and Windows, CUDA builds
  that also run on the CPU on Linux). With uv, `auto` is uv's own `--torch-backend auto`.
- `pypi`: the installer's configured index, whatever the platform.
- `cpu`, `cu126`, `cu128`, `cu130`, `rocm6.4`, ...: that PyTorch index.
`nightly` and `test` (release candidates) use the matching PyTorch channel with pre-releases on.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from torch_upgrade_check.errors import UsageError
from torch_upgrade_check.orchestrate.workers import InfrastructureError

PYTORCH_INDEX = "https://download.pytorch.org/whl"
BACKEND_RE = re.compile(r"^(auto|pypi|cpu|cu\d{3}|rocm\d+\.\d+(\.\d+)?|xpu)$")
VERSION_RE = re.compile(r"^\d+\.\d+(\.\d+)?([.-]?(a|b|rc|dev|post)\d+)*(\+[\w.]+)?$")
RANGE_RE = re.compile(r"^(\s*(==|!=|<=|>=|<|>|~=)\s*\d+(\.\d+)*(\.\*)?\s*,?)+$")
RECORD = "torch-upgrade-check-env.json"
INSTALL_TIMEOUT_S = 3600
NIGHTLY_MAX_AGE_DAYS = 7
# CUDA builds PyTorch publishes, newest first, with the lowest driver CUDA version each needs.
CUDA_BUILDS = (("cu130", (13, 0)), ("cu128", (12, 8)), ("cu126", (12, 6)), ("cu118", (11, 8)))


@dataclass(frozen=True)
class TorchSpec:
    """What the user asked for: `kind` is version, range, nightly, test or current."""

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
    if s in ("nightly", "test"):
        return TorchSpec(s, s, "torch")
    if VERSION_RE.match(s):
        return TorchSpec(s, "version", f"torch=={s}")
    if RANGE_RE.match(s):
        return TorchSpec(s, "range", f"torch{s.replace(' ', '')}")
    raise UsageError(f"{flag} must be a torch version like 2.13.0, a range like '>=2.12,<2.14', nightly, test "
                     f"or current, got {text!r}")


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

    def key(self) -> str:
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:12]


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


def index_for(backend: str, spec: TorchSpec, driver: tuple[int, int] | None) -> str:
    """The index URL for torch, or "" for the installer's configured index."""
    channel = {"nightly": "/nightly", "test": "/test"}.get(spec.kind, "")
    if backend == "pypi":
        return ""
    if backend == "auto":
        if driver is None:
            return f"{PYTORCH_INDEX}{channel}/cpu" if channel else ""
        build = next((b for b, need in CUDA_BUILDS if driver >= need), None)
        return f"{PYTORCH_INDEX}{channel}/{build}" if build else (f"{PYTORCH_INDEX}{channel}/cpu" if channel else "")
    return f"{PYTORCH_INDEX}{channel}/{backend}"


def choose_installer(requested: str) -> str:
    if requested not in ("auto", "uv", "pip"):
        raise UsageError(f"--installer must be auto, uv or pip, got {requested!r}")
    if requested == "auto":
        return "uv" if shutil.which("uv") else "pip"
    if requested == "uv" and not shutil.which("uv"):
        raise UsageError("--installer uv was asked but uv is not on PATH; install uv or use --installer pip")
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


def ensure_env(
    spec: TorchSpec,
    *,
    base_python: str,
    venv_root: Path,
    backend: str,
    index_url: str,
    extra_index_urls: tuple[str, ...],
    find_links: tuple[str, ...],
    extra_requirements: tuple[str, ...],
    installer: str,
    log: Path,
    say: Callable[[str], None] = print,
) -> tuple[str, dict]:
    """(python, record): an environment with `spec` installed and verified, reused when its record matches."""
    if spec.kind == "current":
        return base_python, {"spec": "current"}
    driver = detect_cuda_driver()
    plan = InstallPlan(
        python_version=python_version(base_python),
        requirement=spec.requirement,
        backend=backend,
        index_url=index_url or index_for(backend, spec, driver),
        extra_index_urls=extra_index_urls,
        find_links=find_links,
        pre=spec.pre,
        extra_requirements=extra_requirements,
        installer=installer,
    )
    env_dir = venv_root / f"torch-{re.sub(r'[^A-Za-z0-9.]+', '_', spec.text)}-{plan.key()}"
    record_path = env_dir / RECORD
    python = venv_python(env_dir)
    if record_path.exists() and python.exists():
        try:
            record = json.loads(record_path.read_text())
        except ValueError:
            record = {}
        fresh = spec.kind != "nightly" or time.time() - record.get("created", 0) < 86400
        if record.get("plan") == json.loads(json.dumps(asdict(plan))) and fresh:  # as JSON: tuples are lists
            say(f"reusing {env_dir} (torch {record.get('torch', {}).get('version')})")
            return str(python), record
    shutil.rmtree(env_dir, ignore_errors=True)
    say(f"installing {spec.requirement} into {env_dir} with {installer}"
        f"{' from ' + plan.index_url if plan.index_url else ''} ...")
    try:
        _create(plan, base_python, env_dir, log)
        _install(plan, str(python), log, uv_backend=backend if installer == "uv" and not index_url else "")
        info = _verify(spec, str(python), driver)
    except BaseException:
        shutil.rmtree(env_dir, ignore_errors=True)  # never leave a half-made environment to be reused
        raise
    record = {"plan": asdict(plan), "created": time.time(), "torch": info, "spec": spec.text}
    record_path.write_text(json.dumps(record, indent=2))
    return str(python), record


def _run(cmd: list[str], log: Path, what: str) -> None:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a", encoding="utf-8") as f:
        f.write(f"$ {' '.join(cmd)}\n")
        f.flush()
        try:
            proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=INSTALL_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise InfrastructureError(f"{what} took over {INSTALL_TIMEOUT_S}s and was stopped; see {log}") from None
        except OSError as e:
            raise InfrastructureError(f"{what} could not start: {e.strerror or e}") from None
    if proc.returncode != 0:
        raise InfrastructureError(f"{what} failed: {_installer_message(log)} (full log: {log})")


def _installer_message(log: Path) -> str:
    """The installer's own one-line reason, e.g. pip's 'No matching distribution found for torch==2.99.0'."""
    lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    for pattern in ("No matching distribution", "Cannot install", "No solution found", "ERROR:", "error:", "× "):
        hits = [i for i, ln in enumerate(lines) if pattern in ln]
        if hits:
            i = hits[-1]
            causes = [ln for ln in lines[i + 1 : i + 6] if ln.startswith("The user requested") or ln.startswith("╰─▶")]
            return "; ".join([lines[i], *causes])[:400]
    return lines[-1][:400] if lines else "no output"


def _create(plan: InstallPlan, base_python: str, env_dir: Path, log: Path) -> None:
    if plan.installer == "uv":
        _run(["uv", "venv", "--quiet", "--seed", "--python", base_python, str(env_dir)], log, "creating the venv")
    else:
        _run([base_python, "-m", "venv", str(env_dir)], log, "creating the venv")


def _install(plan: InstallPlan, python: str, log: Path, uv_backend: str) -> None:
    reqs = [plan.requirement, *plan.extra_requirements]
    opts: list[str] = []
    if plan.index_url:
        # torch's own index first; the configured index stays as an extra for torch's dependencies.
        opts += ["--extra-index-url", plan.index_url] if plan.installer == "pip" else ["--index", plan.index_url]
    for url in plan.extra_index_urls:
        opts += ["--extra-index-url", url]
    for link in plan.find_links:
        opts += ["--find-links", link]
    if plan.pre:
        opts += ["--pre"] if plan.installer == "pip" else ["--prerelease", "allow"]
    if plan.installer == "uv":
        if uv_backend and uv_backend != "pypi" and not plan.index_url:
            opts += ["--torch-backend", uv_backend]
        cmd = ["uv", "pip", "install", "--python", python, *opts, *reqs]
    else:
        cmd = [python, "-m", "pip", "install", "--disable-pip-version-check", *opts, *reqs]
    _run(cmd, log, f"installing {' '.join(reqs)}")


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
