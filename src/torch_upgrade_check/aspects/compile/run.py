"""The compile checks' worker side (compile, compile-mode): torch.compile against eager, compiled as the workload
ships it (worker.compiling), with Dynamo's counts of what it compiled and broke, and Inductor's post-grad graphs."""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import torch

from torch_upgrade_check.model import CheckSpec
from torch_upgrade_check.worker import compiling, devices, environment, error_text, tensors, warned
from torch_upgrade_check.worker.compiling import graphs_compiled
from torch_upgrade_check.worker.instance import (
    Instance,
    forward_backward,
    forward_golden,
    forward_only,
    golden,
    not_checked,
    tolerances,
)


def run(spec: CheckSpec, factory: Callable[..., Any], inst: Instance, device: devices.Device) -> dict[str, Any]:
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

