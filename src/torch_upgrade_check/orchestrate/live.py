"""A worker kept alive between requests, for compare's interleaved A/B rounds (no torch here).

Each request is one check spec on the worker's stdin; the answer is its observation. A crash or
timeout kills the worker, is returned as that request's observation, and the next request starts
a fresh worker.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import IO, Any

from torch_upgrade_check.model import CheckSpec, Observation, Status
from torch_upgrade_check.orchestrate import workers
from torch_upgrade_check.schema import PLAN_KIND, PLAN_VERSION

FAST_POLL_S = 0.0005


class LiveWorker:
    def __init__(self, python: str, *, log_dir: Path, name: str, threads: int | None, python_path: list[str],
                 cpus: list[int] | None = None, env: dict[str, str] | None = None, warm: list[str] | None = None) -> None:
        self.python, self.log_dir, self.name = python, log_dir, name
        self.threads, self.python_path, self.cpus, self.env = threads, python_path, cpus or [], env or {}
        self.warm = warm or []  # what the worker readies before it is pinned to `cpus` ("memory": the CPU profiler)
        self.proc: subprocess.Popen[bytes] | None = None
        self.events: IO[str] | None = None
        self.launches = 0
        self.log_path = log_dir / f"{name}-1.log"

    def start(self) -> None:
        """Start the worker now rather than at the first request (a pair's two imports of torch overlap)."""
        if self.proc is None or self.proc.poll() is not None:
            self._start()

    def _start(self) -> None:
        self.launches += 1
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.log_dir / f"{self.name}-{self.launches}.log"
        plan_path = self.log_path.with_suffix(".plan.json")
        events_path = self.log_path.with_suffix(".events.jsonl")
        plan = {"kind": PLAN_KIND, "schema_version": PLAN_VERSION, "threads": self.threads, "probe": [],
                "python_path": self.python_path, "checks": [], "serve": True, "cpus": self.cpus,
                "warm": self.warm}
        plan_path.write_text(json.dumps(plan), encoding="utf-8")
        events_path.write_text("", encoding="utf-8")
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [self.python, "-m", "torch_upgrade_check.worker", str(plan_path), str(events_path)],
                stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, env={**workers.worker_env(), **self.env},
                start_new_session=(os.name == "posix"),
            )
        self.events = events_path.open(encoding="utf-8")
        self._buffer = ""

    def request(self, spec: CheckSpec, timeout_s: float) -> Observation:
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write((json.dumps(spec.to_dict()) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return self._failure(spec, "the worker died before the request reached it", 0.0)
        started = time.monotonic()
        while True:
            for event in self._read():
                if event.get("event") == "observation" and event.get("id") == spec.id:
                    event.pop("event")
                    return Observation.from_dict(event)
            if self.proc.poll() is not None:
                for event in self._read():  # what it wrote just before dying
                    if event.get("event") == "observation" and event.get("id") == spec.id:
                        event.pop("event")
                        return Observation.from_dict(event)
                code = self.proc.returncode
                self.proc = None
                return self._failure(spec, f"the worker crashed: {workers.describe_exit(code)}", time.monotonic() - started)
            if time.monotonic() - started > timeout_s:
                workers.kill(self.proc)
                self.proc = None
                return self._failure(spec, f"timed out after {timeout_s:g}s (per-check --timeout); the worker was killed",
                                     time.monotonic() - started)
            # A/B rounds are tens of milliseconds: answer them at once, and back off for long checks
            waited = time.monotonic() - started
            time.sleep(FAST_POLL_S if waited < 1.0 else workers.POLL_S)

    def _read(self) -> list[dict[str, Any]]:
        assert self.events is not None
        self._buffer += self.events.read()
        *lines, self._buffer = self._buffer.split("\n")
        return [json.loads(line) for line in lines if line.strip()]

    def _failure(self, spec: CheckSpec, message: str, duration: float) -> Observation:
        status = Status.TIMEOUT if message.startswith("timed out") else Status.CRASH
        tail = workers.check_tail(self.log_path, spec.id) or f"(the worker printed nothing; full log: {self.log_path})"
        return Observation(id=spec.id, status=status, message=message, traceback=tail, duration_s=duration)

    def hang_up(self) -> None:
        """Tell the worker that no more requests come (it exits); `close` then waits for it. Hanging up on
        several workers before closing any lets them tear torch down at the same time."""
        if self.proc is not None and self.proc.stdin is not None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass

    def close(self) -> None:
        self.hang_up()
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                workers.kill(self.proc)
        if self.events is not None:
            self.events.close()
