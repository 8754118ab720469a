"""The aspects: each runs one workload one way and returns raw metrics (no pass/fail decisions here).

Device specifics (synchronising, memory counters, precision flags, deterministic algorithms, what
FlexAttention can do) come from the device object in `devices`; host transfers from `tensors.host`.
"""

from __future__ import annotations

import contextlib
import gc
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import torch

from torch_upgrade_check.aspects import ASPECT, Runs, part
from torch_upgrade_check.model import CheckSpec
from torch_upgrade_check.worker import (
    artifacts,
    compilecache,
    compiling,
    crossversion,
    devices,
    environment,
    error_text,
    onnxexport,
    opprofile,
    rounding,
    sdpa_backends,
    shipped,
    tensors,
    warned,
)
from torch_upgrade_check.worker.compiling import graphs_compiled
from torch_upgrade_check.worker.devices import DTYPES
from torch_upgrade_check.worker.instance import (
    Instance,
    Skip,
    build,
    copy_to,
    forward_backward,
    forward_golden,
    forward_only,
    golden,
    not_checked,
    resolve_factory,
    tolerances,
)


def run(spec: CheckSpec, cache: dict[tuple[str, str, str], Instance] | None = None) -> dict[str, Any]:
    """Run one check and return its metrics; raises Skip when the aspect does not apply.

    With `cache`, instances are reused across calls (the A/B latency rounds of `compare`).
    """
    device = devices.get(spec.device)
    if spec.aspect == "artifact":  # a file the team ships: it has its own dtypes, and maybe no factory
        return shipped.run(spec, spec.device)
    support = device.supports_dtype(spec.dtype)
    if not support.ok:
        raise Skip(support.reason)
    ranks = part(spec.aspect, "run") if spec.aspect in ASPECT and ASPECT[spec.aspect].runs is Runs.TORCHRUN else None
    if ranks is not None:  # torchrun's ranks build their own model: no factory, no instance here
        return ranks.run(spec, device)
    factory = resolve_factory(spec)
    with device.precision(spec.dtype) as flags:
        inst = _instance(spec, factory, device, cache)
        if spec.aspect in inst.skip:
            raise Skip(inst.skip[spec.aspect])
        if spec.params.get("profile"):  # compare's attribution of a latency change: the forward, op by op
            metrics = opprofile.run(spec, inst, device)
        else:
            metrics = runner(spec.aspect)(spec, factory, inst, device)
    return {**metrics, **({"precision": flags} if flags else {})}


def _instance(spec: CheckSpec, factory: Callable[..., Any], device: devices.Device,
              cache: dict[tuple[str, str, str], Instance] | None) -> Instance:
    """The workload built for this check, or the one `cache` keeps. On a device with a live counter a check whose
    run.py says BUILT_ALONE (peak memory's) counts from the allocated bytes read just before its instance was built
    (`allocated_before`): the weights and inputs it keeps there count, what earlier checks left (collected first)
    does not. So in the A/B rounds its instance is built alone on the device, and again once another was built there
    after it."""
    key = (spec.workload, spec.dtype, spec.device)
    alone = getattr(part(spec.aspect, "run"), "BUILT_ALONE", False) and device.allocated() is not None
    cached = cache.get(key) if cache is not None else None
    if cached is not None and (not alone or cached.allocated_before is not None):
        return cached
    cached = None  # an instance replaced here must be freed before the device's bytes are read
    if alone and cache is not None:
        for other in [k for k in cache if k[2] == spec.device]:
            del cache[other]
    if alone:
        gc.collect()  # garbage of earlier checks in a cycle would be freed during the call, and read as a shrink
    before = device.allocated() if alone else None
    inst = build(factory, spec.device, DTYPES[spec.dtype])
    inst.allocated_before = before
    if cache is not None:
        for k, other in cache.items():
            if k[2] == spec.device:
                other.allocated_before = None  # built before this one: its zero no longer holds
        cache[key] = inst
    return inst


def numerics(spec: CheckSpec, factory: Callable[..., Any], inst: Instance, device: devices.Device) -> dict[str, Any]:
    rtol, atol = tolerances(spec, inst)
    reference = _simulated_tf32(factory, inst) if spec.dtype == "tf32" else None
    gold = golden(factory, inst)
    metrics = tensors.compare(forward_backward(inst), gold, reference=reference, rtol=rtol, atol=atol, dtype=spec.dtype)
    if metrics["mismatched_count"] and reference is None:  # the yardstick costs a golden: only where it is read
        dtype = DTYPES[spec.dtype]
        try:
            tensors.add_model_error(metrics, gold, golden(factory, inst, within=lambda: rounding.perturbed(dtype)))
            metrics["model_unit"] = rounding.UNIT[spec.dtype]
        except Exception as e:  # an allowance only (FlexAttention will not compile under a dispatch mode): rtol/atol stand
            metrics["no_yardstick"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
    return {**metrics, "rtol": rtol, "atol": atol, "not_checked": not_checked(inst), **_sdpa_choice(spec, inst)}


def _simulated_tf32(factory: Callable[..., Any], inst: Instance) -> dict[str, torch.Tensor]:
    """The same computation on the CPU with TF32 rounding simulated: the noise floor TF32 results are held to."""
    cpu = build(factory, "cpu", torch.float32)
    copy_to(inst, cpu, torch.float32)
    if cpu.loss is None and inst.loss is not None:
        cpu.loss = inst.loss
    with tensors.simulated_tf32():
        return forward_backward(cpu, use_reference=True)  # a reference (math attention) is plain matmuls


def cross_backend(spec: CheckSpec, factory: Callable[..., Any], inst: Instance, device: devices.Device) -> dict[str, Any]:
    if device.name == "cpu":
        raise Skip("cross-backend compares an accelerator with the CPU; the device under test is the CPU")
    rtol, atol = tolerances(spec, inst)
    cpu = build(factory, "cpu", DTYPES[spec.dtype])
    copy_to(inst, cpu, DTYPES[spec.dtype])
    with devices.get("cpu").precision(spec.dtype):
        reference = forward_backward(cpu)
    metrics = tensors.compare(forward_backward(inst), golden(factory, inst), reference=reference, rtol=rtol,
                              atol=atol, dtype=spec.dtype)
    no_ref = {}
    if "gradients" in cpu.skip and inst.loss is not None:
        no_ref["gradients"] = f"judged against the fp64 golden alone: the CPU has none to compare ({cpu.skip['gradients']})"
    return {**metrics, "rtol": rtol, "atol": atol, "not_checked": not_checked(inst), "no_reference": no_ref}


def compile_(spec: CheckSpec, factory: Callable[..., Any], inst: Instance, device: devices.Device) -> dict[str, Any]:
    """torch.compile vs eager, compiled as the workload's `compile:` options say (worker.compiling; built-ins:
    torch.compile's defaults, compile-mode in the device's mode): the forward, then (for workloads with a loss) the
    training step's forward and backward; the first calls' times are reported as compile times.

    Unless the options set fullgraph, the model is compiled with fullgraph=True first, as a team that relies on one
    graph does; where that raises (a graph break, a frame Dynamo cannot trace), the error is kept and it is compiled
    again without it, breaks and all, which is what is then judged and counted (fullgraph: true in the options makes
    that error a failure; false compiles without it at once). A model that does not compile at all is a failure,
    recorded as `compile_error`. Dynamo is reset first (its per-function recompile limit is shared by every check in
    this worker), and what it compiled is counted: a model that ran eagerly must never pass as compiled.

    With the factory's dynamic_inputs, each other size then runs through the compiled model (compiling.sweep): the
    graphs compiled for each size (a recompile) are counted, what raises is kept, and the outputs are judged against
    eager's at that size. In compare the baseline saves its compiled outputs and gradients, and the candidate, from
    the baseline's weights and inputs, is judged against them too (`vs_baseline`, the cross-version rule).
    """
    saved = compiling.load_baseline(spec, inst)
    with _post_grad_graphs() as graphs:
        metrics, result, gold = _compile(spec, factory, inst, device)
    metrics["post_grad_graphs"] = graphs
    if result and spec.params.get("mode") == "save":
        compiling.save(spec, inst, result, gold)
    elif result and saved is not None:
        metrics["vs_baseline"] = compiling.against_baseline(result, saved, rtol=metrics["rtol"], atol=metrics["atol"],
                                                            dtype=spec.dtype)
    elif spec.params.get("mode") == "compare":
        metrics["vs_baseline_missing"] = ("the baseline saved no compiled outputs (its compile check failed there, or "
                                          "did not run)" if saved is None else "nothing compiled here to compare")
    return metrics


def _compile(spec: CheckSpec, factory: Callable[..., Any], inst: Instance,
             device: devices.Device) -> tuple[dict[str, Any], dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """The compile check's metrics, and its compiled outputs (with gradients) and their fp64 golden, for compare's
    files ({} when nothing compiled)."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    opts = compiling.options(spec)
    rtol, atol = tolerances(spec, inst)
    eager = forward_only(inst, inst.model)
    training = inst.loss is not None and "gradients" not in inst.skip
    eager_step = forward_backward(inst) if training else {}
    dims = compiling.marked(opts, inst)  # compiling.compiled marks them on the example inputs, the sweep on each size's
    asked: dict[str, Any] = {"compile_options": opts, "compile_env": environment.compile_settings(), "rtol": rtol,
                             "atol": atol, "not_checked": not_checked(inst),
                             **({"dynamic_marked": [f"input{i} dim {d}" for i, d in dims]} if dims else {})}

    def attempt(fullgraph: bool) -> tuple[Any, float]:
        return _first_call(inst, device, compiling.compiled(spec, inst, fullgraph=fullgraph), opts)

    torch._dynamo.reset()
    before = _dynamo_counts(counters)
    fullgraph_error = ""
    try:
        try:
            compiled, compile_time = attempt(opts.get("fullgraph") is not False)
        except Exception as e:
            if opts.get("fullgraph") is False:
                raise
            fullgraph_error = error_text(e)
            torch._dynamo.reset()
            before = _dynamo_counts(counters)  # what the failed attempt counted is not this compile's
            compiled, compile_time = attempt(False)
    except Exception as e:  # it does not compile at all: a finding, not an error of the check
        return ({**asked, "compile_error": error_text(e), "fullgraph": False,
                 **({"fullgraph_error": fullgraph_error} if fullgraph_error else {})}, {}, {})
    result = compiling.outputs(compiled, inst.inputs, opts)
    backward: dict[str, Any] = {}
    if training:
        device.synchronize()
        start = time.perf_counter()
        try:
            result = {**result, **compiling.step(inst, compiled, opts)}
            device.synchronize()
            backward = {"compile_backward_time_s": time.perf_counter() - start, "training_step": True}
        except Exception as e:  # e.g. an autograd.Function whose backward Dynamo cannot trace: the forward is judged
            training = False
            backward = {"training_step": False, "training_step_error": error_text(e)}
    after = _dynamo_counts(counters)
    sizes, swept = compiling.sweep(inst, compiled, opts, dims, graphs_compiled)
    if training:
        gold = golden(factory, inst)
        gold_sizes = forward_golden(factory, inst, inst.dynamic_sweep)[1:] if sizes else []
        reference = {**eager, **{k: v for k, v in eager_step.items() if k.startswith("grad:")}}
    else:
        gold, *gold_sizes = forward_golden(factory, inst, inst.dynamic_sweep if sizes else ())
        reference = eager
    judged, judged_gold, judged_ref = dict(result), dict(gold), dict(reference)
    for other, gold_other, size in zip(inst.dynamic_sweep, gold_sizes, sizes):
        if size["size"] in swept:  # each size's outputs against eager's at that size, named by it
            name = f"size {size['size']}:"
            judged.update({name + k: v for k, v in swept[size["size"]].items()})
            judged_gold.update({name + k: v for k, v in gold_other.items()})
            judged_ref.update({name + k: v for k, v in forward_only(replace(inst, inputs=other), inst.model).items()})
    metrics = tensors.compare(judged, judged_gold, reference=judged_ref, rtol=rtol, atol=atol, dtype=spec.dtype)
    breaks = {k: v - before["breaks"].get(k, 0) for k, v in after["breaks"].items() if v > before["breaks"].get(k, 0)}
    fallbacks = {k for k, v in after["fallbacks"].items() if v > before["fallbacks"].get(k, 0)}
    graphs = after["graphs"] - before["graphs"]
    return ({**metrics, **asked, "compile_time_s": compile_time, **backward,
             "fullgraph": not fullgraph_error, **({"fullgraph_error": fullgraph_error} if fullgraph_error else {}),
             "graphs_compiled": graphs, "graph_breaks": sum(breaks.values()),
             "graph_break_reasons": sorted(breaks)[:5], "dynamo_fallbacks": sorted(fallbacks)[:5],
             **({"dynamic_sizes": sizes} if sizes else {})}, result, gold)


# the post-grad graphs kept per compile check: enough to name where two torches' graphs first differ, small
# enough for report.json
MAX_GRAPHS, MAX_NODES = 8, 400


@contextlib.contextmanager
def _post_grad_graphs() -> Iterator[list[list[str]]]:
    """Each graph Inductor compiles, after its post-grad passes, as one line per node (op, target, dtype and shape),
    through Inductor's own post_grad_custom_post_pass hook. Inductor's FX graph cache and AOTAutograd's cache are
    off meanwhile: a graph served from either (an earlier worker's, on disk) never passes through the hook."""
    from torch._functorch import config as functorch_config
    from torch._inductor import config

    graphs: list[list[str]] = []

    def keep(graph: Any) -> None:
        if len(graphs) < MAX_GRAPHS:
            graphs.append([_node_line(n) for n in list(graph.nodes)[:MAX_NODES]])

    if not hasattr(config, "post_grad_custom_post_pass"):  # an older torch: no graphs kept, nothing else changes
        yield graphs
        return
    caches = {k: False for k in ("fx_graph_cache",) if hasattr(config, k)}
    aot = {k: False for k in ("enable_autograd_cache",) if hasattr(functorch_config, k)}
    with config.patch(post_grad_custom_post_pass=keep, **caches), functorch_config.patch(**aot):
        yield graphs


def _node_line(node: Any) -> str:
    """`call_function aten.mm.default float32[32, 128]`: placeholders and outputs by kind only (their names are
    Inductor's numbering, which differs between releases without meaning anything), a dynamic size as `s`."""
    if node.op in ("placeholder", "output", "get_attr"):
        target = ""
    else:
        target = str(getattr(node.target, "__name__", "") if not hasattr(node.target, "_schema") else node.target)
        target = target or str(node.target)
    val = node.meta.get("val")
    shape = (f" {str(val.dtype).removeprefix('torch.')}{list(val.shape)}"
             if isinstance(val, torch.Tensor) else "")
    shape = re.sub(r"\b([su])\d+\b", r"\1", shape)  # a dynamic size's symbol: numbered differently by each release
    return " ".join(part for part in (node.op, target, shape.strip()) if part)


def _first_call(inst: Instance, device: devices.Device, compiled: Any, opts: dict[str, Any]) -> tuple[Any, float]:
    """The compiled model and how long its first (compiling) forward took."""
    device.synchronize()
    start = time.perf_counter()
    compiling.outputs(compiled, inst.inputs, opts)
    device.synchronize()
    return compiled, time.perf_counter() - start


def _dynamo_counts(counters: Any) -> dict[str, Any]:
    """Dynamo's process-wide counters (they survive reset): graphs compiled, graph breaks and skipped frames, their
    reasons normalised as warnings' are (first line, no venv paths or addresses) to compare across venvs."""
    def reasons(counter: Any) -> dict[str, int]:
        found: dict[str, int] = {}
        for k, v in counter.items():
            key = warned.normalise(str(k))
            found[key] = found.get(key, 0) + int(v)
        return found

    return {"graphs": int(counters["stats"]["unique_graphs"]), "breaks": reasons(counters["graph_break"]),
            "fallbacks": reasons(counters["unimplemented"])}


def _sdpa_choice(spec: CheckSpec, inst: Instance) -> dict[str, Any]:
    """For attention workloads: which SDPA backend torch's default dispatch picks for these inputs here."""
    if not getattr(inst.model, "uses_sdpa", False):
        return {}
    q, k, v = inst.inputs[:3]
    return {"sdpa_backend": sdpa_backends.default_choice(q, k, v, None, causal=True)}


ASPECTS: dict[str, Callable[[CheckSpec, Callable[..., Any], Instance, devices.Device], dict[str, Any]]] = {
    "numerics": numerics,
    "cross-backend": cross_backend,
    "compile": compile_,
    "compile-mode": compile_,
    "cross-version": crossversion.run,
    "compile-cache": compilecache.run,
    "sdpa-backends": sdpa_backends.run,
    "export": artifacts.run,
    "jit": artifacts.run,
    "aoti": artifacts.run,
    "onnx": onnxexport.run,
}




def runner(aspect: str) -> Callable[[CheckSpec, Callable[..., Any], Instance, devices.Device], dict[str, Any]]:
    """The function that runs a check of `aspect`: its folder's run.run, else this module's table's."""
    module = part(aspect, "run")
    return module.run if module is not None else ASPECTS[aspect]


__all__ = ["ASPECTS", "Skip", "build", "run", "runner"]
