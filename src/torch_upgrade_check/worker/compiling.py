"""torch.compile as a workload ships it, and what the compile checks do with the compiled model besides judging it.

A workload's `compile:` options (spec.params[model.COMPILE_OPTIONS]: mode, dynamic, fullgraph, backend, options) say
how the team calls torch.compile; an aspect whose row says `device_mode` (compile-mode) replaces the mode with the one
teams ship for speed on the device (model.COMPILE_MODE_OF). Where the factory gives `dynamic_inputs` (inputs of other
sizes) and the options leave `dynamic` unset, the dimensions that differ are marked dynamic (torch._dynamo.mark_dynamic)
on every input set, as a team marks its batches. `compiled` is the one place that turns all that into a compiled model:
the compile checks call it, and so do compile-cache and compiled-latency, which run and time the compiled model.

Also here: the size sweep (each set of dynamic_inputs through the compiled model, the graphs Dynamo compiled there
counted) and compare's files of compiled outputs (the baseline saves its weights, inputs, compiled outputs and fp64
golden; the candidate loads them and is judged against them by the cross-version rule).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from torch_upgrade_check.aspects import ASPECT
from torch_upgrade_check.model import COMPILE_MODE_OF, COMPILE_OPTIONS, CheckSpec
from torch_upgrade_check.worker import crossversion, error_text, tensors
from torch_upgrade_check.worker.instance import Instance, Skip, grad_leaves


def options(spec: CheckSpec) -> dict[str, Any]:
    """The torch.compile arguments this check compiles with: the workload's `compile:`, and for an aspect whose row
    says `device_mode` the device's mode in place of its mode (and of its Inductor options: torch.compile takes one or
    the other)."""
    given = dict(spec.params.get(COMPILE_OPTIONS) or {})
    if spec.aspect in ASPECT and ASPECT[spec.aspect].device_mode:
        given.pop("options", None)
        given["mode"] = COMPILE_MODE_OF.get(spec.device, COMPILE_MODE_OF["cpu"])
    return given


def dynamic_dims(inst: Instance) -> list[tuple[int, int]]:
    """(input index, dimension) of each tensor input dimension that some set of the factory's dynamic_inputs gives
    another size."""
    dims = []
    for i, x in enumerate(inst.inputs):
        if not isinstance(x, torch.Tensor):
            continue
        others = [o[i] for o in inst.dynamic_sweep if i < len(o) and isinstance(o[i], torch.Tensor) and o[i].dim() == x.dim()]
        dims += [(i, d) for d in range(x.dim()) if any(o.shape[d] != x.shape[d] for o in others)]
    return dims


def marked(opts: Mapping[str, Any], inst: Instance) -> list[tuple[int, int]]:
    """The dimensions to mark dynamic: those that vary, unless the options set `dynamic` themselves."""
    return dynamic_dims(inst) if opts.get("dynamic") is None else []


def mark(inputs: tuple[Any, ...], dims: list[tuple[int, int]]) -> None:
    """torch._dynamo.mark_dynamic on each of `dims` of these inputs, but where it is 0 or 1: Dynamo specialises those
    sizes by design, and a marked one would fail to compile however right the torch."""
    import torch._dynamo

    for i, d in dims:
        if i < len(inputs) and isinstance(inputs[i], torch.Tensor) and inputs[i].dim() > d and inputs[i].shape[d] > 1:
            torch._dynamo.mark_dynamic(inputs[i], d)


def compile_model(model: Any, opts: Mapping[str, Any], *, fullgraph: bool) -> Any:
    """torch.compile(model, ...) with the options given (those not given are left to torch.compile's defaults)."""
    kwargs: dict[str, Any] = {"fullgraph": fullgraph}
    for key in ("backend", "mode", "dynamic"):
        if opts.get(key) not in (None, ""):
            kwargs[key] = opts[key]
    if opts.get("options"):
        kwargs["options"] = dict(opts["options"])  # a copy: torch.compile pops keys from it
    return torch.compile(model, **kwargs)


def compiled(spec: CheckSpec, inst: Instance, *, fullgraph: bool | None = None) -> Any:
    """`inst.model` compiled as the workload's options say, its inputs' varying dimensions marked dynamic (see
    `marked`); `fullgraph` overrides the options' (not given there: False, torch.compile's default)."""
    opts = options(spec)
    mark(inst.inputs, marked(opts, inst))
    return compile_model(inst.model, opts, fullgraph=bool(opts.get("fullgraph")) if fullgraph is None else fullgraph)


def uses_cudagraphs(opts: Mapping[str, Any]) -> bool:
    return opts.get("mode") == "reduce-overhead" or bool((opts.get("options") or {}).get("triton.cudagraphs"))


def outputs(fn: Callable[..., Any], inputs: tuple[Any, ...], opts: Mapping[str, Any]) -> dict[str, torch.Tensor]:
    """One forward without gradients, its outputs copied: under CUDA graphs (reduce-overhead) the next replay
    overwrites a graph's outputs, so each call starts a new step and keeps copies."""
    if uses_cudagraphs(opts) and hasattr(torch.compiler, "cudagraph_mark_step_begin"):
        torch.compiler.cudagraph_mark_step_begin()
    with torch.no_grad():
        return {k: v.detach().clone() for k, v in tensors.flatten(fn(*inputs)).items()}


def step(inst: Instance, compiled: Any, opts: Mapping[str, Any]) -> dict[str, torch.Tensor]:
    """The gradients of the workload's loss through the compiled model (its backward is compiled too), copied: under
    CUDA graphs (reduce-overhead) the backward's outputs are the graph's memory, which the next call (the size
    sweep's, the next step's) reuses, so a gradient kept uncopied would be judged by what a later call left there."""
    leaves = grad_leaves(inst)
    if uses_cudagraphs(opts) and hasattr(torch.compiler, "cudagraph_mark_step_begin"):
        torch.compiler.cudagraph_mark_step_begin()
    with torch.enable_grad():
        out = compiled(*inst.inputs)
        grads = torch.autograd.grad(inst.loss(out), [t for _, t in leaves], allow_unused=True)  # type: ignore[misc]
    return {f"grad:{name}": g.detach().clone() for (name, _), g in zip(leaves, grads) if g is not None}


def graphs_compiled() -> int:
    """Dynamo's count of the graphs this process compiled (it survives torch._dynamo.reset)."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


def fresh_cache() -> Callable[..., Any]:
    """torch's own context manager for a temporary, empty Inductor cache (fresh_cache; before torch 2.7
    fresh_inductor_cache)."""
    from torch._inductor import utils

    fresh = getattr(utils, "fresh_cache", None) or getattr(utils, "fresh_inductor_cache", None)
    if fresh is None:
        raise Skip(f"torch {torch.__version__} has no fresh Inductor cache to compile cold in")
    return fresh


def size_of(inputs: tuple[Any, ...]) -> str:
    """A set of inputs named by its tensors' shapes: `[48, 64]` (several inputs: `[48, 64]; [48]`)."""
    return "; ".join(str(list(x.shape)) for x in inputs if isinstance(x, torch.Tensor)) or "no tensor"


def sweep(inst: Instance, fn: Callable[..., Any], opts: Mapping[str, Any], dims: list[tuple[int, int]],
          graphs: Callable[[], int]) -> tuple[list[dict[str, Any]], dict[str, dict[str, torch.Tensor]]]:
    """Each set of the factory's dynamic_inputs through the compiled model (its varying dimensions marked as the
    example inputs' were): per size, the graphs Dynamo compiled for it (a recompile) and what it raised; and the
    outputs of the sizes that ran, by size."""
    sizes, found = [], {}
    for other in inst.dynamic_sweep:
        args = tuple(x.detach() if isinstance(x, torch.Tensor) else x for x in other)
        mark(args, dims)
        label, before = size_of(args), graphs()
        try:
            found[label] = outputs(fn, args, opts)
            sizes.append({"size": label, "graphs": graphs() - before})
        except Exception as e:
            sizes.append({"size": label, "graphs": graphs() - before, "error": error_text(e)})
    return sizes, found


def saved_path(spec: CheckSpec) -> Path:
    """compare's file of one side's compiled outputs, beside cross-version's in the report's baseline-outputs/."""
    return crossversion.store_path(spec).with_suffix(f".{spec.aspect}.pt")


def load_baseline(spec: CheckSpec, inst: Instance) -> dict[str, Any] | None:
    """The candidate in compare: the baseline's saved compiled outputs, its weights and inputs loaded into `inst` (the
    same function on both sides); None where the baseline saved none (its check failed or did not run)."""
    if spec.params.get("mode") != "compare" or not saved_path(spec).exists():
        return None
    saved = torch.load(saved_path(spec), map_location="cpu", weights_only=True)
    crossversion.load_into(inst, saved, spec.device)
    return saved


def save(spec: CheckSpec, inst: Instance, result: Mapping[str, torch.Tensor], gold: Mapping[str, torch.Tensor]) -> None:
    """The baseline in compare: what the candidate needs to compute its function and be judged against it."""
    path = saved_path(spec)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"torch": str(torch.__version__), **crossversion.saved_weights_and_inputs(inst),
                "outputs": {k: tensors.host(v) for k, v in result.items()},
                "golden": {k: tensors.host(v) for k, v in gold.items()}}, path)


def against_baseline(result: Mapping[str, torch.Tensor], saved: Mapping[str, Any], *, rtol: float, atol: float,
                     dtype: str) -> dict[str, Any]:
    """The compiled outputs (and gradients) against the baseline's fp64 golden, the baseline's compiled outputs the
    reference (closeness's cross-version rule). A tensor only one side produced (a training step that compiles on one
    side only) is listed apart: compile's graph comparison judges that."""
    both = {k: v for k, v in result.items() if k in saved["outputs"] and k in saved["golden"]}
    metrics = tensors.compare(both, saved["golden"], reference=saved["outputs"], rtol=rtol, atol=atol, dtype=dtype)
    one_side = sorted(set(result) ^ set(saved["outputs"]))
    return {**metrics, "rtol": rtol, "atol": atol, "baseline_torch": saved["torch"],
            **({"one_side_only": one_side} if one_side else {})}
