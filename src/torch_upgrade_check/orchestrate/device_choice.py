"""Which device a run uses, and the failing result when the torch under test lost an accelerator (no torch).

`--device auto` means the accelerator that anything here can use: either side's torch (its probe kernel
ran), or this machine itself (an NVIDIA driver, an Apple-silicon Mac). A candidate that cannot use that
accelerator is not quietly run on the CPU: it gets the failing check `environment[-]/device`, with torch's
own reason (a driver too old for the wheel's CUDA, no kernel image for this GPU, a CPU wheel), and its
checks run on the CPU beside it. `--device cpu` opts out.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from torch_upgrade_check.errors import UsageError
from torch_upgrade_check.model import CheckResult, Outcome

ACCELERATORS = ("cuda", "mps")
WORKLOAD, DTYPE, ASPECT = "environment", "-", "device"
Probes = Mapping[str, tuple[bool, str]]


@dataclass(frozen=True)
class Host:
    """An accelerator this machine has whatever torch says: its device name and how that was seen."""

    device: str
    evidence: str


@dataclass(frozen=True)
class Choice:
    """`device`: where the checks run. `expected`: the accelerator the run was meant for ("" when none).
    `lost`: why the torch under test cannot use `expected` although it should (a failing result).
    `note`: why both sides run on the CPU although the candidate could use `expected` (the baseline cannot)."""

    device: str
    expected: str = ""
    lost: str = ""
    note: str = ""

    def record(self, requested: str) -> dict[str, str]:
        """What report.json keeps of the choice (the environment's `device_choice`)."""
        out = {"requested": requested, "expected": self.expected or self.device, "ran_on": self.device}
        return {**out, **({"lost": self.lost} if self.lost else {}), **({"note": self.note} if self.note else {})}

    def result(self, repro: str) -> CheckResult | None:
        """The failing `environment[-]/device` check when an accelerator was lost, else None."""
        if not self.lost:
            return None
        return CheckResult(WORKLOAD, ASPECT, self.device, DTYPE, Outcome.FAILED, reason=self.lost, repro=repro,
                           metrics={"expected_device": self.expected, "ran_on": self.device})


def nvidia_driver(environ: Mapping[str, str] | None = None, proc: Path = Path("/proc/driver/nvidia/version")) -> str:
    """The NVIDIA driver's version ("550.54.15"), "installed" when present but unreadable, "" without one.

    nvidia-smi answers first; one that fails (installed where no driver runs, as in a container image with
    nvidia-utils: it exits 9 with its complaint on stdout) says nothing, and the kernel module's file decides."""
    environ = os.environ if environ is None else environ
    smi = shutil.which("nvidia-smi", path=environ.get("PATH"))
    answer = _smi_driver(smi) if smi else ""
    if answer:
        return answer
    try:
        text = proc.read_text(errors="replace")
    except OSError:
        return ""
    words = text.split()
    return next((w for w in words if w[:1].isdigit() and "." in w), "installed")


def _smi_driver(smi: str) -> str:
    """What nvidia-smi says the driver is: its version, "installed" when it hangs or prints none, "" when it fails."""
    try:
        done = subprocess.run([smi, "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=30, check=False)
    except subprocess.TimeoutExpired:
        return "installed"  # a driver that hangs is there
    except OSError:
        return ""
    if done.returncode != 0:
        return ""
    out = done.stdout.strip()
    return out.splitlines()[0].strip() if out else "installed"


def host_accelerator(environ: Mapping[str, str] | None = None) -> Host | None:
    """The accelerator this machine has, seen without torch: an NVIDIA driver, or an Apple-silicon Mac."""
    driver = nvidia_driver(environ)
    if driver:
        return Host("cuda", f"this machine has an NVIDIA driver ({driver})" if driver != "installed"
                    else "this machine has an NVIDIA driver")
    if platform.system() == "Darwin" and platform.machine() == "arm64":
        return Host("mps", "this machine is an Apple-silicon Mac")
    return None


def choose(requested: str, probes: Mapping[str, Probes], host: Host | None, *, label: str = "") -> Choice:
    """The device for every side of a run. `probes` maps "candidate" (and "baseline" in a comparison) to what
    each side's probe kernels said; `label` names the candidate torch in the failing reason.

    Raises UsageError only when a device was named and nothing here can use it (no side, not the machine).
    """
    candidate, baseline = probes["candidate"], probes.get("baseline")
    if requested == "auto":
        wanted = next((d for d in ACCELERATORS if any(p.get(d, (False, ""))[0] for p in probes.values())), "")
        wanted = wanted or (host.device if host else "")
        if not wanted:
            return Choice("cpu")
    elif requested == "cpu":
        return Choice("cpu")
    else:
        wanted = requested
    cand_ok, cand_why = candidate.get(wanted, (False, f"{wanted} was not probed"))
    base_ok, base_why = (baseline or {}).get(wanted, (False, f"{wanted} was not probed"))
    if cand_ok and (baseline is None or base_ok):
        return Choice(wanted, expected=wanted)
    if cand_ok:  # the baseline cannot: nothing to compare with on that device
        if requested != "auto":
            raise UsageError(f"the baseline cannot use {wanted}: {base_why}; pick a --device both can use")
        return Choice("cpu", expected=wanted, note=(
            f"the baseline torch cannot use {wanted} ({base_why}), so both sides ran on the CPU; "
            f"'run --device {wanted}' checks the candidate there"))
    if base_ok:
        witness = f"the baseline torch could use it ({base_why})"
    elif host is not None and host.device == wanted:
        witness = host.evidence
    else:
        raise UsageError(f"--device {requested} is not usable here: {cand_why}; use --device auto or --device cpu")
    who = f"the candidate torch {label}" if baseline is not None else f"torch {label}"
    return Choice("cpu", expected=wanted, lost=(
        f"{' '.join(who.split())} cannot use {wanted} ({cand_why}), although {witness}; its checks ran on the "
        f"CPU instead (pass --device cpu to test on the CPU on purpose)"))
