"""One side of compare's op-latency check: the aten ops the baseline recorded (`opreplay`: one forward and backward
at the team's shapes) timed one by one on this torch, for time as cross-version replays them for values.

Requests (param `mode`):
- "record" (the baseline, once): records the ops into `ops_file` unless that file exists (cross-version's recording
  is used when it ran);
- "time": times each distinct op (op, its tensor inputs' dtypes, shapes and strides, its other arguments) on the
  baseline's recorded inputs: the fastest of SAMPLES samples of `inner` calls each (given per op; else calibrated
  here so a sample lasts SAMPLE_S), the device synchronised around each, the garbage collector off. The fastest,
  since another process taking the CPU only ever adds time: with one sample a round, on the shared 2-core machine
  (load 4), a 2x slower gelu read faster in 2-4 of 16 rounds and was named in 5 of 10 runs. `keys` limits it to
  those ops.
Ops that change their inputs (in-place, out=) are not timed: repeated, their inputs drift; nor ops missing here
(named) or raising (their message kept: cross-version judges values).
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.utils._pytree import tree_unflatten, treespec_loads

from torch_upgrade_check.model import CheckSpec
from torch_upgrade_check.worker import first_line, opreplay
from torch_upgrade_check.worker.instance import Instance, Skip

SAMPLE_S = 0.0005
SAMPLES = 3
MAX_INNER = 100_000
_LOADED: dict[tuple[str, str], list[dict[str, Any]]] = {}  # (file, device) -> its distinct ops, decoded once a process


def run(spec: CheckSpec, factory: Callable[..., Any], inst: Instance, device: Any) -> dict[str, Any]:
    path = Path(spec.params["ops_file"])
    if spec.params.get("mode") == "record":
        if path.exists():
            return {"ops_file": str(path), "reused": True}
        try:
            return {"ops_file": str(path), "reused": False, **opreplay.record(inst, path)}
        except Exception as e:  # e.g. a higher-order op (FlexAttention) the recording mode cannot pass through
            raise Skip(f"the baseline's aten ops could not be recorded, so none was timed: {type(e).__name__}: "
                       f"{first_line(e)}"[:300]) from e
    ops = _distinct(path, spec.device)
    keys, inner = spec.params.get("keys"), spec.params.get("inner") or {}
    timed = []
    enabled = gc.isenabled()
    gc.disable()
    try:
        for op in ops:
            if keys is not None and op["key"] not in keys:
                continue
            row = {k: op[k] for k in ("key", "op", "inputs", "count")}
            if op.get("why"):
                timed.append({**row, "not_timed": op["why"]})
                continue
            try:
                row.update(_time(op, int(inner.get(op["key"]) or 0), device))
            except Exception as e:  # this torch cannot run the baseline's call: cross-version says so
                row["error"] = f"{type(e).__name__}: {first_line(e)}"[:200]
            timed.append(row)
    finally:
        if enabled:
            gc.enable()
    return {"ops": timed}


def _time(op: dict[str, Any], inner: int, device: Any) -> dict[str, Any]:
    func, args, kwargs = op["func"], op["args"], op["kwargs"]
    with torch.no_grad():
        func(*args, **kwargs)  # warm: the first call of an op in a process is slower
        if not inner:
            device.synchronize()
            t0 = time.perf_counter()
            func(*args, **kwargs)
            device.synchronize()
            once = max(time.perf_counter() - t0, 1e-7)
            inner = max(1, min(MAX_INNER, math.ceil(SAMPLE_S / once)))
        samples = []
        for _ in range(SAMPLES):
            device.synchronize()
            t0 = time.perf_counter()
            for _ in range(inner):
                func(*args, **kwargs)
            device.synchronize()
            samples.append(time.perf_counter() - t0)
    return {"ms": min(samples) * 1000.0 / inner, "inner": inner}


def _distinct(path: Path, device: str) -> list[dict[str, Any]]:
    """The recording's distinct ops in their first order, each with how often the recording called it, decoded onto
    `device` once a process."""
    cached = _LOADED.get((str(path), device))
    if cached is not None:
        return cached
    saved = torch.load(path, map_location="cpu", weights_only=True)
    found: dict[str, dict[str, Any]] = {}
    for rec in saved["ops"]:
        leaves = rec["inputs"]
        tensors = [x for x in leaves if isinstance(x, torch.Tensor)]
        inputs = [f"{opreplay._describe(x)}{'' if x.is_contiguous() else f' strides {list(x.stride())}'}" for x in tensors]
        others = [repr(x)[:40] for x in leaves if not isinstance(x, torch.Tensor)]
        key = f"{rec['op']}({', '.join([*inputs, *others])})"
        if key in found:
            found[key]["count"] += 1
            continue
        entry: dict[str, Any] = {"key": key, "op": rec["op"], "inputs": inputs, "count": 1}
        func = opreplay._resolve(rec["op"])
        if func is None:
            entry["why"] = "not an op of this torch"
        elif func._schema.is_mutable:
            entry["why"] = "changes its inputs (not timed)"
        else:
            args, kwargs = tree_unflatten([opreplay._decode(x, device) for x in leaves], treespec_loads(rec["spec"]))
            entry.update(func=func, args=args, kwargs=kwargs)
        found[key] = entry
    ops = list(found.values())
    _LOADED[(str(path), device)] = ops
    return ops

