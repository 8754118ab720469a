"""One side of a latency change's attribution: the aspect's forward, profiled op by op (torch.profiler).

compare asks for it (param `profile`) in fresh worker pairs after an A/B latency check ends `regression` or
`undecided`; analysis.attribution sets the sides' profiles against each other. Per aten op at its input shapes and
dtypes: its self time per forward call (time in the op less its child ops). CPU activity always; on CUDA the CUDA
activity too, where the profiler offers it, and then an op's time is the device time of the kernels it launched (its
CPU time is the launch). `calls` forwards are profiled after `warmup` plain ones and one profiled call that is
discarded (the profiler's first use in a process is slow), the device synchronised around them.

Which forward: the one the aspect's run.py gives as `forward(spec, inst)` (a callable of one call), so a new timed
aspect (a compiled forward) brings its own.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from torch_upgrade_check.aspects import part
from torch_upgrade_check.model import CheckSpec
from torch_upgrade_check.worker.instance import Instance

MAX_OPS = 200  # op keys returned, the largest first; the rest summed in `other_ms`
# the profiler's names of tensor dtypes (c10's), as torch names them
DTYPE_NAMES = {"float": "float32", "double": "float64", "c10::Half": "float16", "c10::BFloat16": "bfloat16",
               "long int": "int64", "int": "int32", "short int": "int16", "signed char": "int8",
               "unsigned char": "uint8", "bool": "bool", "c10::complex<float>": "complex64",
               "c10::complex<double>": "complex128", "c10::Float8_e4m3fn": "float8_e4m3fn",
               "c10::Float8_e5m2": "float8_e5m2"}
NOT_TENSORS = {"", "Scalar", "ScalarList", "TensorList", "GenericList", "None"}


def run(spec: CheckSpec, inst: Instance, device: Any) -> dict[str, Any]:
    """The profile of `calls` forwards: {"profile": {"calls", "wall_ms", "time", "ops", "other_ms"}}."""
    timed = getattr(part(spec.aspect, "run"), "forward", None)
    if timed is None:
        raise ValueError(f"no profiled forward for the {spec.aspect} aspect")
    params = spec.params
    calls, warmup = max(1, int(params.get("calls") or 1)), int(params.get("warmup", 3))
    forward = timed(spec, inst)
    activities = [torch.profiler.ProfilerActivity.CPU]
    on_device = spec.device == "cuda" and torch.profiler.ProfilerActivity.CUDA in torch.profiler.supported_activities()
    if on_device:
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.no_grad():
        for _ in range(warmup):
            forward()
        with torch.profiler.profile(activities=activities, record_shapes=True):
            forward()  # discarded: a process's first profiled call pays the profiler's start-up
        device.synchronize()
        with torch.profiler.profile(activities=activities, record_shapes=True) as prof:
            device.synchronize()
            started = time.perf_counter()
            for _ in range(calls):
                forward()
            device.synchronize()
            wall = time.perf_counter() - started
    ops, other = _by_op(prof.events(), calls, on_device)
    return {"profile": {"calls": calls, "wall_ms": wall * 1000.0 / calls, "time": "device" if on_device else "cpu",
                        "ops": ops, "other_ms": other},
            "threads": torch.get_num_threads()}


def _by_op(events: Any, calls: int, on_device: bool) -> tuple[list[dict[str, Any]], float]:
    """Self time per forward call, per op name at its tensor inputs' shapes and dtypes; the largest MAX_OPS, and
    the rest's sum."""
    totals: dict[tuple[str, str], dict[str, Any]] = {}
    for e in events:
        if getattr(e, "is_user_annotation", False) or getattr(e, "device_type", None) != torch.autograd.DeviceType.CPU:
            continue
        shapes, dtypes = [], []
        for shape, dtype in zip(e.input_shapes or [], getattr(e, "input_dtypes", None) or []):
            if dtype not in NOT_TENSORS and isinstance(shape, list):
                shapes.append([int(d) for d in shape])
                dtypes.append(DTYPE_NAMES.get(dtype, dtype))
        us = e.self_device_time_total if on_device else e.self_cpu_time_total
        entry = totals.setdefault((e.name, repr((shapes, dtypes))), {"op": e.name, "shapes": shapes, "dtypes": dtypes,
                                                                      "us": 0.0, "count": 0})
        entry["us"] += float(us)
        entry["count"] += 1
    ranked = sorted(totals.values(), key=lambda t: -t["us"])
    ops = [{"op": t["op"], "shapes": t["shapes"], "dtypes": t["dtypes"], "ms": t["us"] / 1000.0 / calls,
            "count": t["count"] / calls} for t in ranked[:MAX_OPS]]
    return ops, sum(t["us"] for t in ranked[MAX_OPS:]) / 1000.0 / calls
