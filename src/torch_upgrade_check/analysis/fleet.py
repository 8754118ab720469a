"""The fleet the candidate must serve: its GPU architectures and oldest driver, judged from the wheel itself (pure).

The candidate's worker reports what the wheel was compiled for (`torch._C._cuda_getArchFlags()`: `sm_XY`
kernels and `compute_XY` PTX) and its CUDA runtime (`torch.version.cuda`); neither needs a GPU, so the check
runs on any runner. A GPU of architecture sm_XY runs a wheel that has sm_XZ kernels with Z <= Y (same major),
or compute_VW PTX with VW <= XY (JIT-compiled by the driver at first use); arch-specific kernels (`sm_90a`)
run only on that exact architecture. The driver: under CUDA minor version compatibility a driver at the major's
floor (MIN_DRIVER) runs the wheel's SASS, but its JIT cannot compile PTX from a newer toolkit, so a GPU the wheel
serves through PTX alone needs the driver the wheel's toolkit shipped with (PTX_DRIVER). torch 2.8's cu128 wheels dropped sm_50-sm_61 (pytorch/pytorch#157517):
a fleet with a GTX 1080 (sm_61) fails here, naming it.

The fleet's smallest card (`memory=24GiB`) is parsed here and judged after the checks ran, as
`environment[-]/fleet-memory`: aspects/fleet_memory/judge.py has the rule.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from torch_upgrade_check.errors import UsageError
from torch_upgrade_check.model import CheckResult, Outcome

WORKLOAD, DTYPE, ASPECT = "environment", "-", "fleet"
MEMORY = re.compile(r"^(\d+(?:\.\d+)?)\s*(gib|gb|mib|mb|tib|tb)$", re.IGNORECASE)
MEMORY_UNITS = {"mib": 2**20, "gib": 2**30, "tib": 2**40, "mb": 10**6, "gb": 10**9, "tb": 10**12}
ARCH = re.compile(r"^(sm|compute)_(\d+)(\d)([af]?)$")  # the last digit is the minor version
# The oldest Linux driver each CUDA major runs with (CUDA minor version compatibility), from NVIDIA's CUDA
# Toolkit release notes ("CUDA Toolkit and Minimum Required Driver Version for CUDA Minor Version Compatibility").
MIN_DRIVER = {11: "450.80.02", 12: "525.60.13", 13: "580.65.06"}
# The Linux driver each toolkit (major, minor) shipped with, at its GA release ("CUDA Toolkit and Corresponding Driver
# Versions", same notes). Minor version compatibility runs a wheel's SASS on MIN_DRIVER, but "applications that
# require PTX JIT compilation" need this one: an older driver's JIT cannot compile a newer toolkit's PTX ISA.
PTX_DRIVER = {(11, 0): "450.51.05", (11, 1): "455.23", (11, 2): "460.27.03", (11, 3): "465.19.01",
              (11, 4): "470.42.01", (11, 5): "495.29.05", (11, 6): "510.39.01", (11, 7): "515.43.04",
              (11, 8): "520.61.05", (12, 0): "525.60.13", (12, 1): "530.30.02", (12, 2): "535.54.03",
              (12, 3): "545.23.06", (12, 4): "550.54.14", (12, 5): "555.42.02", (12, 6): "560.28.03",
              (12, 8): "570.26", (12, 9): "575.51.03", (13, 0): "580.65.06"}
JIT = "PTX, JIT-compiled at first use"


def parse_arch(text: str) -> tuple[str, int, int, str] | None:
    """'sm_86' -> ('sm', 8, 6, ''); 'compute_90' -> ('compute', 9, 0, ''); 'sm_90a' -> ('sm', 9, 0, 'a')."""
    m = ARCH.match(text.strip().lower())
    return (m.group(1), int(m.group(2)), int(m.group(3)), m.group(4)) if m else None


def served_by(arch: str, flags: Sequence[str]) -> str:
    """How a GPU of `arch` runs this wheel ("sm_80 kernels", "compute_90 PTX, JIT-compiled at first use"), or ""."""
    want = parse_arch(arch)
    if want is None:
        return ""
    _, major, minor, _ = want
    kernels = [parse_arch(f) for f in flags]
    exact = [f for f, k in zip(flags, kernels) if k and k[0] == "sm" and k[1] == major and k[2] == minor]
    if exact:
        return f"{exact[0]} kernels"
    same_major = [(k[2], f) for f, k in zip(flags, kernels)
                  if k and k[0] == "sm" and not k[3] and k[1] == major and k[2] <= minor]
    if same_major:
        return f"{max(same_major)[1]} kernels"
    ptx = [((k[1], k[2]), f) for f, k in zip(flags, kernels) if k and k[0] == "compute" and (k[1], k[2]) <= (major, minor)]
    if ptx:
        return f"{max(ptx)[1]} {JIT}"
    return ""


def parse_driver(text: str) -> tuple[int, ...] | None:
    m = re.fullmatch(r"\s*(\d+)(?:\.(\d+))?(?:\.(\d+))?\s*", str(text))
    return tuple(int(g) for g in m.groups() if g is not None) if m else None


def parse_memory(text: object) -> int | None:
    """'24GiB' -> 25769803776 bytes (GiB, MiB, TiB binary; GB, MB, TB decimal); None when it is not a size."""
    m = MEMORY.match(str(text).strip())
    return int(float(m.group(1)) * MEMORY_UNITS[m.group(2).lower()]) if m and float(m.group(1)) > 0 else None


def parse_fleet(value: object, key: str) -> tuple[tuple[str, ...], str, int]:
    """`--fleet` / input 'fleet': architectures, the oldest driver and the smallest card's memory, separated by
    commas or spaces, like 'sm_80, sm_90, driver=535.104.05, memory=24GiB' -> (("sm_80", "sm_90"), "535.104.05",
    25769803776) (0: no memory given); UsageError naming `key` otherwise."""
    archs: list[str] = []
    driver, memory = "", 0
    form = "like 'sm_80, sm_90, driver=535.104.05, memory=24GiB'"
    for item in str(value).replace(",", " ").split():
        name, eq, version = item.partition("=")
        arch = parse_arch(item)
        if eq and name.lower() == "driver" and parse_driver(version) is not None:
            driver = version
        elif eq and name.lower() == "memory" and parse_memory(version) is not None:
            memory = parse_memory(version) or 0
        elif arch is not None and arch[0] == "sm":
            archs.append(item.lower())
        else:
            raise UsageError(f"{key} must list GPU architectures, the oldest driver and the smallest card's memory, "
                             f"{form}; {item!r} is none of them")
    if not archs and not driver and not memory:
        raise UsageError(f"{key} must list GPU architectures, the oldest driver and the smallest card's memory, "
                         f"{form}, got {value!r}")
    return tuple(archs), driver, memory


def judge(archs: Sequence[str], driver: str, environment: Mapping[str, Any], *, label: str, device: str,
          repro: str = "") -> CheckResult:
    """`environment[-]/fleet` for the candidate: failed when an architecture of the fleet has no kernels and no
    PTX in the wheel, the fleet's oldest driver is older than the wheel's CUDA major needs (minor version
    compatibility's floor), or an architecture has PTX only and that driver is older than the one the wheel's
    toolkit shipped with (its JIT cannot compile newer PTX); skipped for a CPU build."""

    def result(outcome: Outcome, reason: str, **metrics: Any) -> CheckResult:
        return CheckResult(WORKLOAD, ASPECT, device, DTYPE, outcome, reason=reason, repro=repro,
                           metrics={"fleet_archs": list(archs), "fleet_driver": driver, **metrics})

    runtime = environment.get("cuda")
    if not runtime:
        return result(Outcome.SKIPPED, f"torch {label} is a build without CUDA: it serves no GPU of the fleet; install "
                                       "its CUDA build (--torch-backend cu128, say) to check the fleet")
    flags = [str(f) for f in environment.get("cuda_arch_list") or []]
    if not flags:
        return result(Outcome.SKIPPED, f"torch {label} (CUDA {runtime}) does not say which GPU architectures it was "
                                       "built for (torch._C._cuda_getArchFlags)")
    problems, served = [], {}
    for arch in archs:
        how = served_by(arch, flags)
        if how:
            served[arch] = how
        else:
            problems.append(f"no kernels for {arch}")
    if problems:
        problems[-1] += (f" (the wheel has {' '.join(flags)}): GPUs of the fleet with that architecture fail with "
                         "'no kernel image is available for execution on the device'")
    need = MIN_DRIVER.get(int(str(runtime).split(".")[0])) if str(runtime).split(".")[0].isdigit() else None
    have = parse_driver(driver) if driver else None
    jit_only = [a for a, how in served.items() if how.endswith(JIT)]
    ptx_need = PTX_DRIVER.get((parse_driver(runtime) or ())[:2])
    if need and have and have < (parse_driver(need) or ()):
        problems.append(f"CUDA {runtime} needs NVIDIA driver {need} or newer; the fleet's oldest is "
                        f"{driver}: there torch.cuda.is_available() is False")
    elif jit := _jit_problem(jit_only, served, runtime, ptx_need, driver, have):  # (below the floor nothing runs)
        problems.append(jit)
    metrics = {"wheel_archs": flags, "cuda_runtime": runtime, "served": served,
               "min_driver": need, "jit_only": jit_only, "ptx_driver": ptx_need}
    if problems:
        return result(Outcome.FAILED, f"torch {label} does not serve the fleet: " + "; ".join(problems), **metrics)
    how = ", ".join(f"{a} by {h}" for a, h in served.items())
    drv = f"; driver {driver} meets CUDA {runtime}'s {metrics['min_driver']}" if need and have else ""
    return result(Outcome.PASSED, f"torch {label} (CUDA {runtime}) serves the fleet: {how}{drv}"
                                  f"{_jit_note(jit_only, runtime, ptx_need, driver, have)}", **metrics)


def _jit_problem(jit_only: Sequence[str], served: Mapping[str, str], runtime: str, ptx_need: str | None,
                 driver: str, have: tuple[int, ...] | None) -> str:
    """Why the fleet's oldest driver cannot JIT-compile the PTX its GPUs without SASS need, or "" when it can (or
    when that driver or the toolkit's own driver is not known)."""
    if not jit_only or not ptx_need or not have or have >= (parse_driver(ptx_need) or ()):
        return ""
    named = ", ".join(f"{a} runs this wheel only through its {served[a].split()[0]} PTX" for a in jit_only)
    return (f"{named}, which the driver JIT-compiles: CUDA {runtime}'s PTX needs NVIDIA driver {ptx_need} or newer "
            f"(minor version compatibility runs a wheel's SASS on an older driver, never a newer toolkit's PTX); "
            f"the fleet's oldest is {driver}: there the first kernel fails with 'the provided PTX was compiled "
            f"with an unsupported toolchain'")


def _jit_note(jit_only: Sequence[str], runtime: str, ptx_need: str | None, driver: str,
              have: tuple[int, ...] | None) -> str:
    """What a passing fleet says of its PTX-only GPUs' driver."""
    if not jit_only or not have:
        return ""
    if not ptx_need:
        return (f"; the driver CUDA {runtime}'s PTX needs is not in this tool's table, so whether {driver} "
                f"JIT-compiles it for {', '.join(jit_only)} is not judged")
    return f"; {driver} JIT-compiles CUDA {runtime}'s PTX ({ptx_need})"
