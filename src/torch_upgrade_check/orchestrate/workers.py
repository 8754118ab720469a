"""Start worker processes in the interpreter under test and supervise them.

Each check runs in a long-lived worker (compiled artifacts are shared, torch is imported once);
when a check crashes the worker or outlives its timeout, the worker is killed, the check is
recorded as an error with the signal or timeout and the tail of the worker's output, and a fresh
worker continues with the next check. Order: timeout, then exit code, then the result file.

With a Budget, the worker times each workload's forward before the workload's first check (worker.pace), within
the budget's `pace_s`; where the budget sizes timeouts (no --timeout given) each of its checks' is then sized from
it (orchestrate.budget), and either way the caller hears it (and says which checks may outlive their timeout). Timed
before each workload rather than all at the start, so that one workload that hangs or takes long to build holds up
no other's results. A forward not timed (it raised, hung or crashed the worker) leaves the floor.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch_upgrade_check
from torch_upgrade_check.model import CheckSpec, Observation, Status
from torch_upgrade_check.orchestrate.budget import Budget, Pace, to_pace
from torch_upgrade_check.schema import PLAN_KIND, PLAN_VERSION, START_MARKER

POLL_S = 0.05
HELLO_TIMEOUT_S = 180.0  # importing torch and probing devices; slow on a cold disk


class InfrastructureError(RuntimeError):
    """The environment under test could not run a worker at all (exit code 3)."""


@dataclass
class WorkerSession:
    """What a set of worker launches observed: the environment, probes and one observation per check."""

    environment: dict[str, Any] = field(default_factory=dict)
    probes: dict[str, tuple[bool, str]] = field(default_factory=dict)
    observations: dict[str, Observation] = field(default_factory=dict)
    launches: int = 0
    # each workload's warm forward and op count as the worker measured them (forward None: not timed; `said` why)
    paces: dict[str, Pace] = field(default_factory=dict)
    said: dict[str, dict[str, Any]] = field(default_factory=dict)  # what the worker said of each, raw


_PACKAGE_PATH_LOCK = threading.Lock()


def package_path() -> Path:
    """A folder holding only this package, for the worker's PYTHONPATH.

    The orchestrator may be installed in a site-packages beside other packages (even another torch);
    the worker must see nothing of it but torch_upgrade_check itself. Safe to call from several
    threads and processes at once: each makes its own link under a unique name and renames it into place.
    """
    with _PACKAGE_PATH_LOCK:
        root = Path(tempfile.gettempdir()) / f"torch-upgrade-check-{os.getuid() if hasattr(os, 'getuid') else 0}"
        pkg = Path(torch_upgrade_check.__file__).resolve().parent
        link_dir = root / f"pkg-{hashlib.sha256(str(pkg).encode()).hexdigest()[:12]}"
        link = link_dir / "torch_upgrade_check"
        if link.resolve() != pkg:
            link_dir.mkdir(parents=True, exist_ok=True)
            tmp = link_dir / f".link-{os.getpid()}-{uuid.uuid4().hex}"
            tmp.symlink_to(pkg, target_is_directory=True)
            os.replace(tmp, link)
        return link_dir


def worker_env() -> dict[str, str]:
    """The environment of a worker: ours, with PYTHONPATH naming this package alone (the plan carries
    the user's python-path, added inside the worker)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(package_path())
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("PYTHONHOME", None)
    return env


def run_worker(
    python: str,
    checks: Sequence[CheckSpec],
    *,
    log_dir: Path,
    timeout_s: float,
    probe: Sequence[str] = (),
    threads: int | None = None,
    python_path: Sequence[str] = (),
    log_prefix: str = "worker",
    on_start: Callable[[CheckSpec], None] = lambda spec: None,
    on_observation: Callable[[CheckSpec, Observation], None] = lambda spec, obs: None,
    budget: Budget | None = None,
    on_paced: Callable[[WorkerSession, str], None] = lambda session, workload: None,
) -> WorkerSession:
    """Run `checks` in workers of `python`; every check ends with exactly one observation.

    Each check's timeout is `timeout_s`; with `budget`, each workload's forward is timed before its first check
    (`on_paced(session, workload)` then, timed or not) and the budget gives each check's timeout.
    Raises InfrastructureError when the first worker cannot import torch or start at all.
    """
    session = WorkerSession()
    remaining = list(checks)
    log_dir.mkdir(parents=True, exist_ok=True)
    pace = to_pace(checks) if budget is not None else []
    budget = budget or Budget(fixed_s=timeout_s)
    while True:
        session.launches += 1
        log_path = log_dir / f"{log_prefix}-{session.launches}.log"
        pending = [s for s in pace if s.workload not in session.paces]  # a relaunch times none twice
        done = _launch(
            python, remaining, session, log_path, budget, probe if session.launches == 1 else (), threads,
            python_path, on_start, on_observation, pending, on_paced,
        )
        remaining = [c for c in remaining if c.id not in session.observations]
        if done or not remaining:
            return session


def _launch(
    python: str,
    checks: list[CheckSpec],
    session: WorkerSession,
    log_path: Path,
    budget: Budget,
    probe: Sequence[str],
    threads: int | None,
    python_path: Sequence[str],
    on_start: Callable[[CheckSpec], None],
    on_observation: Callable[[CheckSpec, Observation], None],
    pace: Sequence[CheckSpec],
    on_paced: Callable[[WorkerSession, str], None],
) -> bool:
    """One worker process; returns True when it finished its plan."""
    by_id = {c.id: c for c in checks}
    # Plan and events stay beside the worker's log: what it was asked and what it said, for debugging.
    plan_path, events_path = log_path.with_suffix(".plan.json"), log_path.with_suffix(".events.jsonl")
    plan = {
        "kind": PLAN_KIND,
        "schema_version": PLAN_VERSION,
        "threads": threads,
        "probe": list(probe),
        "python_path": list(python_path),
        "pace": [c.to_dict() for c in pace],
        "checks": [c.to_dict() for c in checks],
    }
    plan_path.write_text(json.dumps(plan), encoding="utf-8")
    events_path.write_text("", encoding="utf-8")
    cmd = [python, "-m", "torch_upgrade_check.worker", str(plan_path), str(events_path)]
    with log_path.open("ab") as log:
        try:
            proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=worker_env(),
                start_new_session=(os.name == "posix"),
            )
        except OSError as e:
            raise InfrastructureError(f"cannot start interpreter {python}: {e.strerror or e}") from None
        return _supervise(proc, events_path, log_path, by_id, session, budget, on_start, on_observation,
                          _Pacing(on_paced))


@dataclass
class _Pacing:
    """Which workload's forward the worker is timing, since when; `on_paced` called for each, timed or not."""

    on_paced: Callable[[WorkerSession, str], None]
    workload: str | None = None
    since: float = 0.0

    def timed(self, session: WorkerSession, event: dict[str, Any]) -> None:
        workload, forward, ops = str(event["workload"]), event.get("forward_s"), event.get("ops")
        session.paces[workload] = Pace(None if forward is None else float(forward), None if ops is None else int(ops))
        session.said[workload] = event
        self.workload = None
        self.on_paced(session, workload)

    def failed(self, session: WorkerSession, why: str) -> None:
        """The workload being timed killed or hung the worker: no figure for it; its checks run in a fresh worker."""
        if self.workload is not None:
            self.timed(session, {"workload": self.workload, "error": why})


def _supervise(
    proc: subprocess.Popen[bytes],
    events_path: Path,
    log_path: Path,
    by_id: dict[str, CheckSpec],
    session: WorkerSession,
    budget: Budget,
    on_start: Callable[[CheckSpec], None],
    on_observation: Callable[[CheckSpec, Observation], None],
    pacing: _Pacing,
) -> bool:
    hello = False
    current: str | None = None
    timeout_s = budget.base_s
    started_at = time.monotonic()
    launched_at = time.monotonic()
    with events_path.open(encoding="utf-8") as events:
        buffer = ""
        while True:
            exited = proc.poll() is not None
            chunk = events.read()
            buffer += chunk
            *lines, buffer = buffer.split("\n")
            for line in lines:
                if not line.strip():
                    continue
                event = json.loads(line)
                kind = event.pop("event")
                if kind == "hello":
                    hello = True
                    session.environment = event["environment"]
                    session.probes.update({k: (bool(v[0]), str(v[1])) for k, v in event["probes"].items()})
                elif kind == "pacing":
                    pacing.workload, pacing.since = str(event["workload"]), time.monotonic()
                elif kind == "pace":
                    pacing.timed(session, event)
                elif kind == "start":
                    current, started_at = event["id"], time.monotonic()
                    spec = by_id[current]
                    timeout_s = budget.timeout(spec.aspect, session.paces.get(spec.workload))
                    on_start(spec)
                elif kind == "observation":
                    obs = Observation.from_dict(event)
                    session.observations[obs.id] = obs
                    on_observation(by_id[obs.id], obs)
                    current = None
                elif kind == "done":
                    proc.wait()
                    return True
            if exited and not chunk:
                break
            now = time.monotonic()
            if not hello and now - launched_at > HELLO_TIMEOUT_S:
                kill(proc)
                raise InfrastructureError(
                    f"the worker did not start within {HELLO_TIMEOUT_S:.0f}s (importing torch): {_tail(log_path)}"
                )
            if pacing.workload is not None and now - pacing.since > budget.pace_s:
                kill(proc)  # the checks run in a fresh worker, with the floor for this workload's
                pacing.failed(session, f"it was not built and run within {budget.pace_s:g}s; the worker was killed")
                return False
            if current is not None and now - started_at > timeout_s:
                kill(proc)
                _record_failure(current, f"timed out after {timeout_s:g}s ({_whose(budget, by_id[current])}); the "
                                "worker was killed", log_path, now - started_at, by_id, session, on_observation)
                return False
            time.sleep(POLL_S)
    code = proc.wait()
    if not hello:
        raise InfrastructureError(
            f"the worker exited ({describe_exit(code)}) before reporting its environment; is torch installed "
            f"in that interpreter? {_tail(log_path, lines=3)}"
        )
    if current is not None:
        _record_failure(current, f"the worker crashed: {describe_exit(code)}", log_path,
                        time.monotonic() - started_at, by_id, session, on_observation)
        return False
    if pacing.workload is not None:  # it died timing a forward: no check is its victim
        pacing.failed(session, f"the worker exited while timing it: {describe_exit(code)}")
        return False
    # The worker exited between checks without finishing: treat the next check as the victim
    # so that a restart cannot loop forever.
    pending = [i for i in by_id if i not in session.observations]
    if pending:
        _record_failure(pending[0], f"the worker exited before this check started: {describe_exit(code)}",
                        log_path, 0.0, by_id, session, on_observation)
    return False


def _record_failure(
    check: str,
    message: str,
    log_path: Path,
    duration: float,
    by_id: dict[str, CheckSpec],
    session: WorkerSession,
    on_observation: Callable[[CheckSpec, Observation], None],
) -> None:
    status = Status.TIMEOUT if message.startswith("timed out") else Status.CRASH
    tail = check_tail(log_path, check) or f"(the worker printed nothing; full log: {log_path})"
    obs = Observation(id=check, status=status, message=message, traceback=tail, duration_s=duration)
    session.observations[check] = obs
    on_observation(by_id[check], obs)


def _whose(budget: Budget, spec: CheckSpec) -> str:
    """Which timeout it was: the team's --timeout, or the one sized from the workload's forward (and how to raise it)."""
    if not budget.sized:
        return "the per-check --timeout"
    return (f"the per-check timeout, sized from {spec.workload}'s forward within {budget.base_s:g}-{budget.cap_s:g}s; "
            "--timeout SECONDS sets it")


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"killed by {name}"
    return f"exit code {code}"


def kill(proc: subprocess.Popen[bytes]) -> None:
    """Kill the worker and anything it started (FSDP ranks, compile workers)."""
    try:
        if os.name == "posix":
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
    except ProcessLookupError:
        pass
    proc.wait()


def _tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])


def check_tail(path: Path, check: str, lines: int = 30) -> str:
    """What the worker printed since it started `check` (it prints a marker line before each check)."""
    try:
        text = path.read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return ""
    marker = f"{START_MARKER}{check}\n"
    text = text[text.rfind(marker) + len(marker):] if marker in text else ""
    return "\n".join(text.strip().splitlines()[-lines:])
