"""Versioned JSON documents (report, worker plan, worker events) and atomic writes (stdlib only)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from torch_upgrade_check.model import Bisection, Report

REPORT_KIND = "torch-upgrade-check/report"
REPORT_VERSION = 1
COMPARISON_KIND = "torch-upgrade-check/comparison"
BISECT_KIND = "torch-upgrade-check/bisect"
PLAN_KIND = "torch-upgrade-check/plan"
PLAN_VERSION = 1
API_NAMES_KIND = "torch-upgrade-check-api-names"  # the api check's question to aspects/api/apinames.py, and its answer
API_NAMES_VERSION = 1
START_MARKER = "--- torch-upgrade-check: start "  # the worker prints it to stderr before each check


class SchemaError(ValueError):
    """A document is not what this version of the tool reads; the message says which and why."""


def atomic_write_text(path: Path, text: str) -> None:
    """Write via a temporary file in the same folder and rename, so readers never see half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def reports_to_json(reports: list[Report]) -> str:
    """One report as a report document; a comparison (several) as a comparison document holding them."""
    if len(reports) == 1:
        return report_to_json(reports[0])
    doc = {"kind": COMPARISON_KIND, "schema_version": REPORT_VERSION,
           "reports": [_scrub(r.to_dict()) for r in reports]}
    return json.dumps(doc, indent=2, allow_nan=False) + "\n"


def write_reports(reports: list[Report], path: Path) -> None:
    atomic_write_text(path, reports_to_json([_finite(r) for r in reports]))


def read_reports(path: Path) -> list[Report]:
    """The reports in a report.json: one for `run`, baseline and candidate for `compare`."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise SchemaError(f"cannot read report {path}: {e.strerror}; check the path") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        doc = None
    if isinstance(doc, dict) and doc.get("kind") == COMPARISON_KIND:
        if doc.get("schema_version") != REPORT_VERSION:
            raise SchemaError(f"{path} has schema_version {doc.get('schema_version')!r}; this torch-upgrade-check "
                              f"reads version {REPORT_VERSION}: re-create it with the same version of the tool")
        return [report_from_json(json.dumps({"kind": REPORT_KIND, "schema_version": REPORT_VERSION, **r}), str(path))
                for r in doc.get("reports", [])]
    return [report_from_json(text, source=str(path))]


def report_to_json(report: Report) -> str:
    doc = {"kind": REPORT_KIND, "schema_version": REPORT_VERSION, **report.to_dict()}
    return json.dumps(doc, indent=2, sort_keys=False, allow_nan=False, default=_nan_safe) + "\n"


def _nan_safe(value: Any) -> Any:
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def write_report(report: Report, path: Path) -> None:
    atomic_write_text(path, report_to_json(_finite(report)))


def _finite(report: Report) -> Report:
    """JSON has no NaN/inf; metrics carry them as strings ("nan", "inf") so nothing is lost."""
    return Report.from_dict(_scrub(report.to_dict()))


def _scrub(value: Any) -> Any:
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return str(value)
    if isinstance(value, dict):
        return {k: _scrub(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_scrub(v) for v in value)
    return value


def report_from_json(text: str, source: str = "report") -> Report:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise SchemaError(f"{source} is not JSON ({e}); pass the report.json that torch-upgrade-check wrote") from None
    if not isinstance(doc, dict) or doc.get("kind") != REPORT_KIND:
        raise SchemaError(f"{source} is not a torch-upgrade-check report (no kind '{REPORT_KIND}')")
    version = doc.get("schema_version")
    if version != REPORT_VERSION:
        raise SchemaError(
            f"{source} has schema_version {version!r}; this torch-upgrade-check reads version {REPORT_VERSION}: "
            "re-create it with the same version of the tool"
        )
    body = {k: v for k, v in doc.items() if k not in ("kind", "schema_version")}
    try:
        return Report.from_dict(body)
    except (TypeError, ValueError, KeyError) as e:
        raise SchemaError(f"{source} is malformed ({e}); re-create it with torch-upgrade-check run") from None


def read_report(path: Path) -> Report:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise SchemaError(f"cannot read report {path}: {e.strerror}; check the path") from None
    return report_from_json(text, source=str(path))


def write_bisection(bisection: Bisection, path: Path) -> None:
    doc = {"kind": BISECT_KIND, "schema_version": REPORT_VERSION, **_scrub(bisection.to_dict())}
    atomic_write_text(path, json.dumps(doc, indent=2, allow_nan=False) + "\n")


def read_bisection(path: Path) -> Bisection:
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise SchemaError(f"cannot read bisection {path}: {e}; pass the report.json that bisect wrote") from None
    if not isinstance(doc, dict) or doc.get("kind") != BISECT_KIND or doc.get("schema_version") != REPORT_VERSION:
        raise SchemaError(f"{path} is not a version {REPORT_VERSION} bisection (kind '{BISECT_KIND}')")
    body = {k: v for k, v in doc.items() if k not in ("kind", "schema_version")}
    try:
        return Bisection.from_dict(body)
    except (TypeError, ValueError, KeyError) as e:
        raise SchemaError(f"{path} is malformed ({e}); re-create it with torch-upgrade-check bisect") from None
