"""A workload's warm eager forward, timed once before its checks: what the orchestrator sizes their timeouts from
(orchestrate.budget).

The workload is built as its checks build it (the same factory, device, dtype and seed), run once cold under a
dispatch mode that counts the aten ops it runs (what an Inductor compile's time grows with; the cold call's time,
lazy initialisation and weight layouts, is not the model's pace), then timed up to WARM times (the median; fewer
once they pass WARM_S), the device synchronised around each, under no_grad; then freed. Warnings raised here are recorded as the
workload's, raised by "pace" (torch warns some only once a process: the warnings check must still see them). A
factory or forward that raises gives no figure: its checks keep the default timeout and say what is wrong.
"""

from __future__ import annotations

import gc
import statistics
import time
from typing import Any

import torch

from torch_upgrade_check.model import CheckSpec
from torch_upgrade_check.worker import devices, first_line, warned
from torch_upgrade_check.worker.devices import DTYPES
from torch_upgrade_check.worker.instance import build, resolve_factory

PACE = "pace"  # the name its warnings are recorded under
WARM = 3  # timed forwards at most: one read alone is a preemption's on a loaded machine
WARM_S = 1.0  # ... and no more once they took this long


def measure(spec: CheckSpec) -> dict[str, Any]:
    """{"forward_s": a warm forward's seconds, "first_s": the cold one's, "ops": aten ops a forward (None: not
    counted)}, or {"error": why none was timed}."""
    try:
        with warned.capture(CheckSpec(spec.workload, PACE, spec.device, spec.dtype, spec.factory, spec.params)):
            return _timed(spec)
    except Exception as e:
        return {"error": f"{type(e).__name__}: {first_line(e)}"[:300]}
    finally:
        gc.collect()


def _timed(spec: CheckSpec) -> dict[str, Any]:
    device = devices.get(spec.device)
    if not device.supports_dtype(spec.dtype).ok:
        return {"error": f"{spec.dtype} is not supported on {spec.device}"}
    with device.precision(spec.dtype):
        inst = build(resolve_factory(spec), spec.device, DTYPES[spec.dtype])  # as the checks build it: grad on
    with device.precision(spec.dtype), torch.no_grad():
        if isinstance(inst.model, torch.nn.Module):
            inst.model.eval()
        start = time.perf_counter()
        ops = _ops(inst)
        seconds = [time.perf_counter() - start]
        while len(seconds) < 1 + WARM and (len(seconds) < 2 or sum(seconds[1:]) < WARM_S):
            device.synchronize()
            start = time.perf_counter()
            inst.model(*inst.inputs)
            device.synchronize()
            seconds.append(time.perf_counter() - start)
    return {"forward_s": statistics.median(seconds[1:]), "first_s": seconds[0], "ops": ops}


def _ops(inst: Any) -> int | None:
    """Aten ops one forward dispatches (its first: the caller's cold call); None where the dispatch mode is missing or
    the model refuses it (then the forward runs plainly, still cold)."""
    try:
        from torch.utils._python_dispatch import TorchDispatchMode
    except ImportError:
        inst.model(*inst.inputs)
        return None

    class Count(TorchDispatchMode):
        calls = 0

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            self.calls += 1
            return func(*args, **(kwargs or {}))

    try:
        with Count() as counted:
            inst.model(*inst.inputs)
    except Exception:  # a custom op or a tensor subclass the mode cannot pass: the forward's time alone sizes
        inst.model(*inst.inputs)
        return None
    return counted.calls
