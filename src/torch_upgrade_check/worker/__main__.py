"""Worker entry point: `python -m torch_upgrade_check.worker PLAN.json EVENTS.jsonl`.

Reads a plan (schema.PLAN_KIND), writes one JSON event per line to EVENTS, flushed as it goes:
  {"event": "hello", "environment": {...}, "probes": {device: [available, reason]}}
  {"event": "pacing", "workload": ...}    before a workload's first check, when the plan's "pace" names it
  {"event": "pace", "workload": ..., "forward_s": ..., "ops": ...}   its forward, timed (or "error")
  {"event": "start", "id": ...}            before each check
  {"event": "observation", ...}            after each check (model.Observation)
  {"event": "done"}
The orchestrator turns a missing observation after a "start" into a crash or timeout record.
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import os
import signal
import sys
import threading
import time
import traceback
from typing import IO, Any

from torch_upgrade_check.worker import first_line

# cuBLAS needs this before CUDA initialises to run deterministic algorithms.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")


def _emit(stream: IO[str], event: dict[str, Any]) -> None:
    stream.write(json.dumps(event, default=str) + "\n")
    stream.flush()


def _die_with_parent() -> None:
    """The worker runs in its own process group; if the orchestrator dies, take the group down too."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        if hasattr(os, "killpg"):
            os.killpg(os.getpgid(0), signal.SIGKILL)
        os._exit(1)

    threading.Thread(target=watch, name="orphan-watchdog", daemon=True).start()


def _run_one(spec: Any, events: IO[str], cache: dict | None) -> None:
    from torch_upgrade_check.model import Observation
    from torch_upgrade_check.schema import START_MARKER
    from torch_upgrade_check.worker import checks, isolation, warned

    if cache is None:  # a check of the plan starts as in a fresh process; the A/B rounds keep their compiled models
        isolation.forget_compiled()
    sys.stdout.flush()
    print(f"{START_MARKER}{spec.id}", file=sys.stderr, flush=True)  # crash tails start here
    _emit(events, {"event": "start", "id": spec.id, "time": time.time()})
    start = time.perf_counter()
    try:
        with warned.capture(spec) if cache is None else contextlib.nullcontext():  # not in the A/B rounds
            # not timed either: under warn-always each op that falls back warns at every call
            with warned.mps_fallback(spec) if cache is None else contextlib.nullcontext({}) as fell_back:
                metrics = checks.run(spec, cache)
        obs = Observation(id=spec.id, status="ok", metrics={**metrics, **fell_back})
    except checks.Skip as e:
        obs = Observation(id=spec.id, status="skipped", message=str(e))
    except Exception as e:
        first = first_line(e)
        obs = Observation(
            id=spec.id,
            status="exception",
            message=f"{type(e).__name__}: {first}"[:500],
            traceback="".join(traceback.format_exception(e))[-4000:],
        )
    obs = Observation(**{**obs.to_dict(), "duration_s": time.perf_counter() - start})
    _emit(events, {"event": "observation", **obs.to_dict()})


def _wait_for(path: str | None) -> None:
    """Before a check that needs another process's files (compare's cross-version: the baseline's saved
    outputs), wait for the file that says they are complete. Not timed as the check: the orchestrator
    writes that file even when the other side fails, and this process dies with the orchestrator."""
    while path and not os.path.exists(path):
        time.sleep(0.05)


def _fit_compile_threads() -> None:
    """Inductor sizes its compile pool from the CPUs it may use when its config is first imported. Imported before
    the pin (by a torch whose import brings it, a plugin, a sitecustomize), it would compile through a pool of
    processes sharing the pinned CPU, on that side only: size it again, by torch's own rule (which reads
    TORCHINDUCTOR_COMPILE_THREADS first), never above what it was. Not imported yet: it will see the pin itself."""
    config = sys.modules.get("torch._inductor.config")
    decide = getattr(config, "decide_compile_threads", None)
    if decide is not None and isinstance(getattr(config, "compile_threads", None), int):
        config.compile_threads = min(config.compile_threads, decide())


def _pin(cpus: list[int]) -> None:
    """Pin every thread of this process to `cpus`, not only the calling one (sched_setaffinity pins one thread):
    the watchdog and the pools torch started while it imported and readied the profiler would otherwise run on
    other CPUs, outside the pair's CPUs and its host-load meter (orchestrate.hostload). Threads started later
    inherit the pin; the loop catches one started while it ran."""
    want, done = set(cpus), set()
    while True:
        try:
            tids = {int(t) for t in os.listdir("/proc/self/task")} - done
        except OSError:  # no /proc: the calling thread only
            tids = {0} - done
        if not tids:
            return
        for tid in tids:
            try:
                os.sched_setaffinity(tid, want)
            except OSError:  # it ended meanwhile
                pass
        done |= tids


def _pace(workload: str, asked: dict[str, Any], events: IO[str]) -> None:
    """Before a workload's first check, its forward timed (worker.pace), once, where the plan asks: the orchestrator
    sizes its checks' timeouts from it, and bounds the timing itself ("pacing" says it began)."""
    raw = asked.pop(workload, None)
    if raw is None:
        return
    from torch_upgrade_check.model import CheckSpec
    from torch_upgrade_check.worker import pace

    _emit(events, {"event": "pacing", "workload": workload})
    _emit(events, {"event": "pace", "workload": workload, **pace.measure(CheckSpec.from_dict(raw))})


def main(argv: list[str]) -> int:
    _die_with_parent()
    faulthandler.enable()  # a segfault or abort prints the Python stack: the crash record's details
    plan_path, events_path = argv
    with open(plan_path, encoding="utf-8") as f:
        plan = json.load(f)
    from torch_upgrade_check.schema import PLAN_KIND, PLAN_VERSION

    if plan.get("kind") != PLAN_KIND or plan.get("schema_version") != PLAN_VERSION:
        print(f"worker: plan {plan_path} is not a version {PLAN_VERSION} plan", file=sys.stderr)
        return 2
    with open(events_path, "a", encoding="utf-8") as events:
        import torch  # a failure here is the orchestrator's "torch not importable" error

        from torch_upgrade_check.model import CheckSpec
        from torch_upgrade_check.worker import environment, instance

        if {"memory", "profiler"} & set(plan.get("warm", [])):  # the CPU profiler: peak memory, op profiles
            from torch_upgrade_check.worker import memory

            try:  # before the pinning below: two workers pinned to one CPU would pay it in turn
                memory.warm_up("cpu")
            except Exception as e:  # the memory checks themselves then say what is wrong
                print(f"worker: could not ready the CPU profiler: {type(e).__name__}: {e}", file=sys.stderr)
        if plan.get("cpus") and hasattr(os, "sched_setaffinity"):
            _pin(plan["cpus"])
            _fit_compile_threads()
        if plan.get("threads"):
            torch.set_num_threads(int(plan["threads"]))
        instance.add_python_path(plan.get("python_path", []))
        probes = {d: environment.probe(d) for d in plan.get("probe", [])}
        _emit(events, {"event": "hello", "environment": environment.collect(), "probes": probes})
        import gc

        gc.freeze()  # torch's own objects never become garbage: collections before timing skip them (200 ms -> ms)
        asked = {raw["workload"]: raw for raw in plan.get("pace", [])}
        for raw in plan.get("checks", []):
            spec = CheckSpec.from_dict(raw)
            _pace(spec.workload, asked, events)
            _wait_for(spec.params.get("after"))
            _run_one(spec, events, None)
        if plan.get("serve"):
            # compare's A/B rounds: one check spec per line on stdin, instances kept between rounds.
            cache: dict = {}
            for line in sys.stdin:
                if line.strip():
                    _run_one(CheckSpec.from_dict(json.loads(line)), events, cache)
        _emit(events, {"event": "done"})
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    # Everything is reported ("done" is written and the events file closed): skip the interpreter's teardown,
    # which with Inductor's compile workers takes seconds the orchestrator would wait for (they watch this
    # process and exit with it).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
