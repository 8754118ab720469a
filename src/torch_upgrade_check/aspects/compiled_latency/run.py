"""The compiled model's forward latency, timed by latency's loop (aspects/latency/run.py) around a model compiled
once an instance (the workload's compile options: worker.compiling)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from torch_upgrade_check.aspects.latency.run import forward_latency
from torch_upgrade_check.model import CheckSpec
from torch_upgrade_check.worker import compiling
from torch_upgrade_check.worker.compiling import graphs_compiled
from torch_upgrade_check.worker.devices import Device
from torch_upgrade_check.worker.instance import Instance

_KEY = "compiled-latency"  # where an instance keeps its compiled model across compare's A/B rounds


def run(spec: CheckSpec, factory: Callable[..., Any], inst: Instance, device: Device) -> dict[str, Any]:
    """The compiled model's forward latency, timed as `latency` times eager's. The model is compiled once an instance
    (compare's A/B rounds reuse it), its first, compiling call outside the timed calls (`compile_s`, with Dynamo's
    imports; `compiled_s`: what this request spent compiling, which compare's budget leaves out). Dynamo is reset
    before a compile (its recompile limit is shared by every model in the worker); where anything compiled in this
    worker since this model's last samples (another check's compile, a reset that makes it compile again), one call
    untimed first; where it still compiled while it was timed, it is timed again. A model that compiled no graph
    raises: its samples would be eager's."""
    start = time.perf_counter()
    import torch._dynamo  # a worker's first: seconds, the compile's

    if isinstance(inst.model, torch.nn.Module):
        inst.model.eval()
    entry = inst.compiled.get(_KEY)
    if entry is None:
        torch._dynamo.reset()
        entry = {"model": compiling.compiled(spec, inst), "seen": None}
    compiled_s = 0.0  # what this call spent compiling (compare's budget leaves it out, as compile-time's warm-ups)
    if graphs_compiled() != entry["seen"]:  # new, or something compiled in this worker since its last samples
        before = graphs_compiled()
        with torch.no_grad():
            entry["model"](*inst.inputs)
        device.synchronize()
        compiled_s = time.perf_counter() - start
        if "compile_s" not in entry:
            entry.update(compile_s=compiled_s, graphs=graphs_compiled() - before)
            inst.compiled[_KEY] = entry
        if not entry["graphs"]:
            raise RuntimeError("torch.compile compiled no graph of this model (it ran eagerly): its samples would be "
                               "eager latency's")
    seen = graphs_compiled()
    metrics = forward_latency(spec, inst, device, entry["model"])
    again = graphs_compiled() != seen
    if again:
        metrics = forward_latency(spec, inst, device, entry["model"])
    entry["seen"] = graphs_compiled()
    return {**metrics, "compile_s": entry["compile_s"], "compiled_s": compiled_s, "graphs_compiled": entry["graphs"],
            **({"timed_again": "it compiled again while timed"} if again else {})}


def forward(spec: CheckSpec, inst: Instance) -> Callable[[], Any]:
    """The model compiled as `run` compiles it (the workload's compile options), as one call, for worker.opprofile:
    its first call, a warm-up one, compiles. Inductor's fused kernels are no aten ops: their time is the self time of
    the profiler's range around the compiled region ("Torch-Compiled Region: 0/0"), beside the extern kernels
    (aten::mm, aten::addmm) the compiled graph calls."""
    import torch._dynamo

    if isinstance(inst.model, torch.nn.Module):
        inst.model.eval()
    torch._dynamo.reset()
    model = compiling.compiled(spec, inst)
    return lambda: model(*inst.inputs)
