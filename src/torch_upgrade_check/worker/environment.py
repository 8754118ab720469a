"""What torch, hardware and platform this worker runs on, and which devices really work (probe kernels)."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from importlib import metadata
from typing import Any

import torch

from torch_upgrade_check.model import COMPILE_ENV_PREFIXES
from torch_upgrade_check.worker import devices, first_line

# read when the worker starts: Inductor sets some of them itself once imported (TORCHINDUCTOR_CACHE_DIR)
_COMPILE_SETTINGS = {k: v for k, v in sorted(os.environ.items()) if k.startswith(COMPILE_ENV_PREFIXES)}


def compile_settings() -> dict[str, str]:
    """The variables that change what torch.compile does (TORCH_COMPILE_*, TORCHINDUCTOR_*, TORCHDYNAMO_*) as the
    worker was started with them: a team's own settings apply to the checks, and each report says which did."""
    return dict(_COMPILE_SETTINGS)


def collect() -> dict[str, Any]:
    """The environment, modelled on torch.utils.collect_env; values are strings or None when absent."""
    env: dict[str, Any] = {
        "torch_version": torch.__version__,
        "torch_git": getattr(torch.version, "git_version", None),
        "cuda": torch.version.cuda,
        "hip": getattr(torch.version, "hip", None),
        "cudnn": None,
        "nccl": None,
        "triton": _dist_version("triton") or _dist_version("pytorch-triton"),
        "mps_built": bool(torch.backends.mps.is_built()),
        "cuda_devices": [],
        "driver": None,
        "python": sys.version.split()[0],
        "python_executable": sys.executable,
        "os": platform.platform(),
        "machine": platform.machine(),
        "cpu": _cpu_name(),
        "cpu_count": os.cpu_count(),
        "cpu_affinity": _affinity(),
        "threads": torch.get_num_threads(),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        "macos": platform.mac_ver()[0] or None,
        "mps_fallback": os.environ.get("PYTORCH_ENABLE_MPS_FALLBACK"),  # "1": ops MPS lacks run on the CPU, silently
        "compile_env": compile_settings(),  # the team's TORCH_COMPILE_*, TORCHINDUCTOR_*, TORCHDYNAMO_* settings
        "cuda_arch_list": _cuda_arches(),
        "packages": _packages(),
    }
    if torch.backends.cudnn.is_available():
        env["cudnn"] = str(torch.backends.cudnn.version())
    if torch.cuda.is_available():
        env["cuda_devices"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        try:
            env["nccl"] = ".".join(str(p) for p in torch.cuda.nccl.version())
        except Exception:
            env["nccl"] = None
        env["driver"] = _nvidia_driver()
    env.update(devices.environment())
    return env


def _cuda_arches() -> list[str]:
    """What this wheel was compiled for (sm_XY kernels, compute_XY PTX), read without a GPU; [] for a CPU build."""
    flags = getattr(torch._C, "_cuda_getArchFlags", None)
    try:
        return str(flags() or "").split() if flags is not None else []
    except Exception:
        return []


def _affinity() -> list[int] | None:
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None


def _packages() -> dict[str, str]:
    """Every distribution installed beside torch (name -> version): "cuDNN 9.8 -> 9.10 came with this torch"."""
    found: dict[str, str] = {}
    for dist in metadata.distributions():
        name = (dist.metadata["Name"] or "").lower()
        if name and name not in found:
            found[name] = dist.version
    return dict(sorted(found.items()))


def _dist_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _cpu_name() -> str:
    if sys.platform.startswith("linux"):
        try:
            with open("/proc/cpuinfo", encoding="utf-8") as f:
                for line in f:
                    if line.startswith("model name"):
                        return line.split(":", 1)[1].strip()
        except OSError:
            pass
    if sys.platform == "darwin":
        out = _run(["sysctl", "-n", "machdep.cpu.brand_string"])
        if out:
            return out
    return platform.processor() or platform.machine()


def _nvidia_driver() -> str | None:
    if shutil.which("nvidia-smi") is None:
        return None
    # a failing nvidia-smi prints its complaint on stdout: only a successful one's answer is a version
    out = _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], succeeded=True)
    return out.splitlines()[0].strip() if out else None


def _run(cmd: list[str], *, succeeded: bool = False) -> str:
    """The command's stdout, "" when it cannot run or times out (or, with `succeeded`, exits non-zero)."""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return "" if succeeded and done.returncode != 0 else done.stdout.strip()


def probe(device: str) -> tuple[bool, str]:
    """(available, reason): a device counts only if a small kernel runs there and gives the right answer.

    Hosted macOS runners report MPS available but cannot run kernels on it; this catches that.
    """
    if device == "cuda" and not torch.cuda.is_available():
        return False, f"cuda not available: {_cuda_unavailable()}"
    if device == "mps" and not torch.backends.mps.is_available():
        why = "torch built without MPS" if not torch.backends.mps.is_built() else "no usable Metal device"
        return False, f"mps not available: {why}"
    try:
        x = torch.arange(16, dtype=torch.float32).reshape(4, 4)
        expected = x @ x + 1
        with devices.get(device).precision("float32"):  # TF32 would round the exact integers here
            got = (x.to(device) @ x.to(device) + 1).cpu()
        if not torch.equal(got, expected):
            return False, f"{device} probe kernel gave a wrong answer (max error {(got - expected).abs().max().item():g})"
    except Exception as e:
        return False, f"{device} probe kernel failed: {type(e).__name__}: {first_line(e)}{_cuda_build(device)}"
    return True, f"{device} probe kernel ran and matched"


def _cuda_unavailable() -> str:
    """torch's own reason CUDA cannot start (a driver too old for this wheel's CUDA, no driver, a CPU wheel)."""
    if torch.version.cuda is None:
        return "torch built without CUDA (a CPU-only wheel)"
    try:
        torch.cuda.init()  # raises what is_available() only warns: the driver version and what this wheel needs
    except Exception as e:
        return f"{type(e).__name__}: {first_line(e)}{_cuda_build('cuda')}"
    return f"no CUDA device found{_cuda_build('cuda')}"


def _cuda_build(device: str) -> str:
    """What this wheel was built for: its CUDA runtime and GPU architectures (a GPU missing from them has no kernels)."""
    if device != "cuda" or torch.version.cuda is None:
        return ""
    arches = " ".join(_cuda_arches())
    return f" (this wheel: CUDA {torch.version.cuda}" + (f", kernels for {arches})" if arches else ")")
