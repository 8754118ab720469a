"""A history record from a report.json: both torches, the runner, each check's outcome, ratio and key figures.

The record's shape is `schema/history-record.schema.json` (versioned by its `schema` word). It is built from the
versioned report.json the tool writes, never from torch: the orchestrator's host may not have it.
"""

from __future__ import annotations

import json
import math
import os
import platform
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from torch_upgrade_check.analysis import trends
from torch_upgrade_check.aspects import ASPECT, part
from torch_upgrade_check.errors import UsageError
from torch_upgrade_check.report.checks import columns_of, primary_of

SCHEMA_PREFIX = "torch-upgrade-check/history/"
SCHEMA = f"{SCHEMA_PREFIX}2"  # 2: a check's metrics are its key figures (its summary columns) and `primary` names one
READABLE = (f"{SCHEMA_PREFIX}1", SCHEMA)  # 1: every finite number of a check, alphabetically, 24 at most; no primary
# the identity's fields that decide a series (analysis/trends.py's, the one spelling): kernel and runner are kept too
IDENTITY_KEYS = trends.IDENTITY_KEYS
MAX_METRICS = 24  # a record keeps at most this many numbers per check, so a store of 1,000 runs stays small
# the A/B engine's figures (analysis.ab.Decision.metrics), for every aspect measured A/B: the ratio and its interval
AB_KEYS = ("ratio", "ci_low", "ci_high")
_NIGHTLY_DATE = re.compile(r"\.dev(\d{4})(\d{2})(\d{2})")


def from_report(report: dict[str, Any], *, identity: dict[str, Any], commit: str, when: str) -> dict[str, Any]:
    """One record from a parsed report.json (a `run` report or a `compare` comparison): the candidate's checks decide."""
    baseline, candidate = _sides(report)
    if not isinstance(identity, dict):
        raise UsageError(f"a history record's identity must be a mapping, got {type(identity).__name__}")
    record: dict[str, Any] = {
        "schema": SCHEMA,
        "when": utc_iso(when),
        "commit": str(commit or ""),
        "identity": dict(identity),
        "torch": {"baseline": _torch(baseline), "candidate": _torch(candidate)},
        "checks": {_check_id(r): _check(r) for r in candidate.get("results", ()) if isinstance(r, dict)},
    }
    if candidate.get("infra_error"):
        record["infra_error"] = str(candidate["infra_error"])
    if candidate.get("tool_version"):
        record["tool_version"] = str(candidate["tool_version"])
    return record


def here(report: dict[str, Any], commit: str | None = None) -> dict[str, Any]:
    """The record of `report` as this runner made it, now: `commit` (None: $GITHUB_SHA) and this machine's identity."""
    sha = commit if commit is not None else os.environ.get("GITHUB_SHA", "")
    return from_report(report, identity=runner_identity(), commit=sha, when=now_utc())


def from_file(path: Path, *, commit: str | None = None, flag: str = "--append") -> dict[str, Any]:
    """`here` of the report.json at `path`; one it cannot read or parse is bad input naming `flag`."""
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise UsageError(f"cannot read {flag} {path}: {e.strerror}; pass the report.json that run or compare "
                         "wrote") from None
    except json.JSONDecodeError as e:
        raise UsageError(f"{flag} {path} is not JSON ({e.msg} at line {e.lineno}); pass the report.json that run "
                         "or compare wrote") from None
    return here(report, commit)


def utc_iso(when: str) -> str:
    """`when` as ISO-8601 UTC with a Z; one that names no zone is taken as UTC; anything else is bad input."""
    try:
        moment = datetime.fromisoformat(str(when).replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"a history record's time must be ISO-8601 like 2026-12-03T04:05:06Z, got {when!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_utc() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def build_date(version: str) -> str | None:
    """A nightly's build date from its version (2.15.0.dev20261203+cpu -> 2026-12-03); None for a release."""
    m = _NIGHTLY_DATE.search(version or "")
    return f"{m[1]}-{m[2]}-{m[3]}" if m else None


def _sides(report: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(baseline, candidate) of a comparison; a single run is the candidate, with no baseline ({})."""
    if not isinstance(report, dict):
        raise UsageError("report.json must hold a JSON object; pass the report.json that run or compare wrote")
    if report.get("kind") == "torch-upgrade-check/comparison":
        reports = [r for r in report.get("reports", ()) if isinstance(r, dict)]
        by_role = {r.get("role"): r for r in reports}
        candidate = by_role.get("candidate") or (reports[-1] if reports else None)
        if candidate is None:
            raise UsageError("the comparison in report.json holds no reports; pass a report.json that compare finished")
        return by_role.get("baseline", {}), candidate
    if report.get("kind") != "torch-upgrade-check/report":
        raise UsageError(f"report.json has kind {report.get('kind')!r}, not a torch-upgrade-check report; pass the "
                         "report.json that run or compare wrote")
    return {}, report


def _torch(side: dict[str, Any]) -> dict[str, Any]:
    """Which torch a side ran: version, git commit, label and (for a nightly) its build date; {} for no side."""
    if not side:
        return {}
    env = side.get("environment") or {}
    version = str(env.get("torch_version") or side.get("label") or "")
    return {"version": version, "git": env.get("torch_git") or None, "label": str(side.get("label") or ""),
            "build_date": build_date(version)}


def _check_id(result: dict[str, Any]) -> str:
    return str(result.get("id") or f"{result.get('workload')}[{result.get('dtype')}]/{result.get('aspect')}")


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _check(result: dict[str, Any]) -> dict[str, Any]:
    """A check's outcome, its A/B ratio and interval (None where it has none), its key figures and the primary one."""
    metrics = result.get("metrics") or {}
    ratio, low, high = (_number(metrics.get(k)) for k in AB_KEYS)
    primary, figures = key_metrics(str(result.get("aspect") or ""), metrics)
    return {"outcome": str(result.get("outcome") or "error"), "ratio": ratio,
            "ci": [low, high] if low is not None and high is not None else None,
            "metrics": figures, "primary": primary if primary in figures else None}


def key_metrics(aspect: str, metrics: Mapping[str, Any]) -> tuple[str, dict[str, float]]:
    """(the primary figure's key, {key: number}): the columns the aspect's summary table shows, primary first, read
    from its typed `Metrics` where it has a folder; a list counted where its column counts it, other values left out."""
    columns = [primary_of(aspect), *columns_of(aspect)]
    read = _typed_reader(aspect, metrics) or metrics.get
    figures: dict[str, float] = {}
    for col in columns:
        value = read(col.key)
        if col.kind == "count" and isinstance(value, (list, tuple)):
            value = len(value)
        number = _number(value)
        if number is not None and col.key not in figures:
            figures[col.key] = number
    return columns[0].key, dict(list(figures.items())[:MAX_METRICS])


def _typed_reader(aspect: str, metrics: Mapping[str, Any]) -> Callable[[str], Any] | None:
    """A key's value read by attribute from the aspect's `Metrics` (judge.py); None for an aspect with no folder yet,
    whose figures are read from the dict (that fallback goes once every aspect has its folder)."""
    judge = part(aspect, "judge") if aspect in ASPECT else None
    kind = getattr(judge, "Metrics", None)
    if kind is None:
        return None
    typed = kind.from_dict(metrics)
    named = kind.named()
    # a figure the judge derived (added after the worker's) is not one of the type's fields: it is kept in rest_
    return lambda key: getattr(typed, key) if key in named else typed.rest_.get(key)


def runner_identity() -> dict[str, Any]:
    """This machine as a series sees it: CPU model, GPU and driver (nvidia-smi, when present), OS, machine."""
    gpu, driver = _nvidia()
    return {"cpu": _cpu_model(), "gpu": gpu, "driver": driver, "os": _os_name(), "machine": platform.machine(),
            "kernel": platform.release(), "runner": os.environ.get("RUNNER_NAME") or None}


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Processor", "cpu model") and value.strip():
                return value.strip()
    except OSError:
        pass
    if platform.system() == "Darwin":
        out = _quiet(["sysctl", "-n", "machdep.cpu.brand_string"])
        if out:
            return out
    return platform.processor() or platform.machine() or "unknown"


def _os_name() -> str:
    """The OS and its release (Ubuntu 24.04, macOS 15.3), not the kernel build: an image update keeps the series."""
    if platform.system() == "Darwin":
        return f"macOS {platform.mac_ver()[0]}".strip()
    try:
        fields = dict(line.split("=", 1) for line in Path("/etc/os-release").read_text(encoding="utf-8").splitlines()
                      if "=" in line)
        name = f"{fields.get('NAME', '').strip(chr(34))} {fields.get('VERSION_ID', '').strip(chr(34))}".strip()
        if name:
            return name
    except OSError:
        pass
    return f"{platform.system()} {platform.release()}".strip()


def _nvidia() -> tuple[str | None, str | None]:
    """The first GPU's name and the driver, from nvidia-smi; (None, None) without one."""
    if not shutil.which("nvidia-smi"):
        return None, None
    out = _quiet(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"])
    if not out:
        return None, None
    name, _, driver = out.splitlines()[0].partition(",")
    return name.strip() or None, driver.strip() or None


def _quiet(cmd: list[str]) -> str:
    """A small probe's stdout, or "" when it fails or hangs (an identity is never worth a failed run)."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return proc.stdout.strip() if proc.returncode == 0 else ""
