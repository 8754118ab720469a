"""The `merge` command: reports from several runners (and runners that left none) into one summary and JUnit file.

What each runner job of the reusable workflow left behind becomes Reports, so a job without a report is an error.

The reusable workflow's check job writes `runner-status.json` beside its report (also when the job failed
before the tool ran: a bad input, a failed install, a timeout) and uploads both as one artifact. `merge`
turns every job that left no report (its status says so, or it left nothing at all) into a Report whose
`infra_error` says why, so the merged summary, JUnit file, outputs and verdict (error) come from the same
renderers and the same rule as every other run. The workflow writes the file, this reads it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from torch_upgrade_check import __version__
from torch_upgrade_check.commands.common import finish
from torch_upgrade_check.commands.settings import MergeSettings
from torch_upgrade_check.errors import UsageError
from torch_upgrade_check.model import CheckResult, Outcome, Report, Side
from torch_upgrade_check.schema import SchemaError, read_reports

STATUS_KIND = "torch-upgrade-check/runner-status"
STATUS_VERSION = 1
STATUS_FILE = "runner-status.json"
# The check job's steps before the status is written, by the ids the workflow gives them, in order, and what
# the job was doing there: the first that did not succeed is where the job stopped.
STEPS = (
    ("guard", "checking that the workflow knows its own repository and commit"),
    ("caller", "checking out your repository"),
    ("self", "checking out torch-upgrade-check (a private copy needs the action-token secret)"),
    ("check", "running torch-upgrade-check"),
)
# A `runners` entry is a label, a list of labels, or an object with its labels and its own device and python.
ENTRY_KEYS = ("labels", "device", "python")
ENTRY_DEVICES = ("auto", "cpu", "cuda", "mps")
# A label naming one of these words (split at - and _, any case: `gpu`, `linux-cuda`, `nvidia_a100`) marks a GPU
# runner; so does an entry's own `device: cuda|mps`. Its checks must run on that accelerator, not on the CPU.
GPU_WORDS = frozenset({"gpu", "cuda", "nvidia", "mps"})
RUNNER_DEVICE = ("environment", "-", "runner-device")  # workload, dtype, aspect of the merge's own check
NO_STATUS = ("the job left no report and no status: it was cancelled, ran past timeout-minutes, lost its runner "
             "or never started; see the job in the workflow run")


@dataclass(frozen=True)
class RunnerStatus:
    """One check job, as it saw itself at its end: which runner, how each step ended, whether a report exists."""

    runner: tuple[str, ...]
    index: int | None  # strategy.job-index: the runner's position in `runners` (None: unknown, as under act)
    job_status: str  # job.status: success, failure or cancelled
    steps: dict[str, str] = field(default_factory=dict)  # step id -> outcome (success, failure, cancelled, skipped, "")
    verdict: str = ""  # the action's `verdict` output ("" when the action never set it)
    report: bool = False  # whether report.json existed when the job ended
    device: str = "auto"  # the device the job asked for
    timeout_minutes: int | None = None
    runner_device: str = ""  # the `device` of the runner's own `runners` entry ("" when it gave none)


def labels(runner: Any) -> tuple[str, ...]:
    """A runs-on value as label strings: "ubuntu-latest" -> ("ubuntu-latest",); a list stays a list."""
    if isinstance(runner, str):
        return (runner,)
    if isinstance(runner, list) and runner and all(isinstance(x, str) for x in runner):
        return tuple(runner)
    raise ValueError(f"a runner must be a label or a list of labels, got {json.dumps(runner)}")


def entry_labels(entry: Any) -> tuple[str, ...]:
    """One `runners` entry's labels: a label, a list of labels, or {"labels": ..., "device": ..., "python": ...}."""
    if not isinstance(entry, dict):
        return labels(entry)
    unknown = sorted(set(entry) - set(ENTRY_KEYS))
    if unknown or "labels" not in entry:
        raise ValueError(f"a runner object needs 'labels' and may have 'device' and 'python', got {json.dumps(entry)}")
    if entry.get("device", "auto") not in ENTRY_DEVICES:
        raise ValueError(f"a runner's device must be one of {', '.join(ENTRY_DEVICES)}, got {json.dumps(entry)}")
    if not isinstance(entry.get("python", ""), str):
        raise ValueError(f"a runner's python must be a string, got {json.dumps(entry)}")
    return labels(entry["labels"])


def parse_runners(text: str) -> list[tuple[str, ...]]:
    """The reusable workflow's `runners` input (a JSON list of entries) -> one label tuple per check job."""
    problem = (f"--runners must be a JSON list of runner label sets like '[[\"self-hosted\", \"cuda\"], "
               f"[\"ubuntu-latest\"]]' or objects like '{{\"labels\": [\"self-hosted\", \"gpu\"], \"device\": "
               f"\"cuda\", \"python\": \"python3.12\"}}', got {text!r}")
    try:
        runners = json.loads(text)
    except ValueError:
        raise UsageError(problem) from None
    try:
        if not isinstance(runners, list):
            raise ValueError("")
        return [entry_labels(r) for r in runners]
    except ValueError as e:  # an entry's own problem, said after the form
        raise UsageError(f"{problem}: {e}" if str(e) else problem) from None


def read_status(path: Path) -> RunnerStatus:
    """A runner-status.json; a file this version cannot read is a SchemaError naming the file and the fix."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise SchemaError(f"cannot read runner status {path}: {e.strerror}; check the path") from None
    except ValueError as e:
        raise SchemaError(f"runner status {path} is not JSON ({e}); it is written by the reusable workflow's "
                          f"check job, pass that file") from None
    if not isinstance(doc, dict) or doc.get("kind") != STATUS_KIND:
        raise SchemaError(f"{path} is not a torch-upgrade-check runner status (no kind '{STATUS_KIND}')")
    if doc.get("schema_version") != STATUS_VERSION:
        raise SchemaError(f"{path} has schema_version {doc.get('schema_version')!r}; this torch-upgrade-check reads "
                          f"version {STATUS_VERSION}: use the workflow and the tool from the same commit")
    try:
        steps = doc.get("steps") or {}
        timeout = doc.get("timeout_minutes")
        return RunnerStatus(
            runner=labels(doc["runner"]), index=None if doc["index"] is None else int(doc["index"]),
            job_status=str(doc.get("job_status", "")),
            steps={str(k): str(v) for k, v in steps.items()}, verdict=str(doc.get("verdict", "")),
            report=doc.get("report") is True, device=str(doc.get("device") or "auto"),
            timeout_minutes=int(timeout) if isinstance(timeout, int) and not isinstance(timeout, bool) else None,
            runner_device=str(doc.get("runner_device") or ""),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise SchemaError(f"runner status {path} is malformed ({e}); it is written by the reusable workflow's "
                          f"check job, pass that file") from None


def why(status: RunnerStatus) -> str:
    """Why this job left no report, in one sentence that says where to look."""
    if status.job_status == "cancelled":
        limit = f"ran past timeout-minutes ({status.timeout_minutes})" if status.timeout_minutes else "timed out"
        return f"the job was cancelled or {limit} before torch-upgrade-check wrote a report"
    stopped = next((sid for sid, _ in STEPS if status.steps.get(sid) in ("failure", "cancelled")), None)
    if stopped is None:
        return f"the job ended ({status.job_status or 'status unknown'}) without a report; see its log"
    if stopped != "check":
        return f"the job failed while {dict(STEPS)[stopped]}, before torch-upgrade-check ran; see its log"
    if status.verdict == "error":
        return ("torch-upgrade-check stopped before any check ran: a bad input or config, a device the runner "
                "cannot use, or the tool could not be installed; the job's annotations say which, and the fix")
    return "the job failed while running torch-upgrade-check and wrote no report; see its log"


def missing_report(runner: Sequence[str], reason: str, device: str = "auto") -> Report:
    """A run that could not happen on this runner: an `infra_error` Report, named after the runner's labels."""
    names = ", ".join(runner)
    return Report(tool_version=__version__, device=device, requested_device=device, label=f"({names})", command=[],
                  started="", environment={"runner": names}, infra_error=f"no report from this runner: {reason}")


def missing_reports(statuses: Sequence[RunnerStatus], expected: Sequence[Sequence[str]] | None = None) -> list[Report]:
    """A Report per job that left no report, in the order of the runners: each status that says so, and each
    expected runner (the workflow's `runners`) that left no status at all.

    A status names its runner by position (strategy.job-index); one without a position (act leaves it empty)
    claims the first expected runner with the same labels that no other status claimed.
    """
    expected = [tuple(r) for r in expected or ()]
    claimed: set[int] = set()
    found: list[tuple[float, Report | None]] = []
    for s in statuses:
        i = s.index if s.index is not None and s.index not in claimed else None
        if i is None:
            i = next((j for j, r in enumerate(expected) if r == s.runner and j not in claimed), None)
        if i is not None:
            claimed.add(i)
        found.append((len(expected) if i is None else i, None if s.report else missing_report(s.runner, why(s), s.device)))
    found += [(j, missing_report(runner, NO_STATUS)) for j, runner in enumerate(expected) if j not in claimed]
    return [r for _, r in sorted(found, key=lambda e: e[0]) if r is not None]


def gpu_runner(status: RunnerStatus) -> str:
    """Why this runner is meant to run its checks on a GPU ("its runners entry asks for device cuda", "its label
    'linux-gpu'"), "" when it is not: an entry's own `device: cpu` says the CPU is meant, whatever the labels."""
    if status.runner_device in ("cuda", "mps"):
        return f"its runners entry asks for device {status.runner_device}"
    if status.runner_device == "cpu":
        return ""
    named = next((label for label in status.runner
                  if GPU_WORDS & set(re.split(r"[-_]", label.lower()))), None)
    return f"its label '{named}'" if named else ""


def on_the_cpu(status: RunnerStatus, report: Report) -> Report:
    """`report` with a failing `environment[-]/runner-device` check when the runner is meant for a GPU (see
    gpu_runner) and the report's checks ran on the CPU; unchanged otherwise. A baseline is left as it is: its
    candidate beside it carries the failure (a baseline never decides)."""
    meant = gpu_runner(status)
    if not meant or report.device != "cpu" or report.role == Side.BASELINE or report.infra_error:
        return report
    names = ", ".join(status.runner)
    asked = status.runner_device or status.device
    reason = (f"runner ({names}) is meant for a GPU ({meant}) but its checks ran on the CPU (device {asked}); "
              f"give the job a GPU torch can use, or set \"device\": \"cpu\" in its runners entry if the CPU is meant")
    workload, dtype, aspect = RUNNER_DEVICE
    result = CheckResult(workload, aspect, "cpu", dtype, Outcome.FAILED, reason=reason,
                         metrics={"runner": names, "gpu_because": meant, "ran_on": report.device})
    return replace(report, results=(*report.results, result))


def execute(s: MergeSettings) -> int:
    expected = parse_runners(s.runners) if s.runners is not None else None
    statuses = [read_status(Path(p)) for p in s.runner_status]
    beside = {Path(p).resolve().parent: status for p, status in zip(s.runner_status, statuses)}
    reports = []
    for p in s.reports:  # a status beside a report is its runner's: a GPU runner whose checks ran on the CPU fails
        status = beside.get(Path(p).resolve().parent)
        reports += [on_the_cpu(status, r) if status else r for r in read_reports(Path(p))]
    reports += missing_reports(statuses, expected)
    if not reports:
        raise UsageError("merge found nothing to merge: no report.json given, and every runner status says its "
                         "report exists; pass the report.json files too")
    return finish(s.output, reports, None, 0.0)
