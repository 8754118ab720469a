"""CUDA graphs' reuse of output memory, emulated on the CPU for tests (TUC_EMULATE_CUDAGRAPHS=1).

Under torch.compile(mode="reduce-overhead") on CUDA, Inductor's CUDA graph trees keep every graph's outputs in one
memory pool, and a new generation (torch.compiler.cudagraph_mark_step_begin, or the next invocation of a compiled
function) reuses the memory of the previous generation's outputs: a tensor a caller kept from an earlier call, a
forward's output or a backward's gradient alike, no longer holds what that call computed. On CUDA torch marks such a
tensor so that reading it raises ("accessing tensor output of CUDAGraphs that has been overwritten by a subsequent
run", torch._C._set_storage_access_error_msg); that setter exists only in CUDA builds, so here the stale outputs are
overwritten instead, with NaN (what the pool's reuse leaves in them is whatever the later call wrote there).

What is emulated: every Inductor-compiled graph (CompiledFxGraph) built while `triton.cudagraphs` was on (mode
reduce-overhead, or options {"triton.cudagraphs": True}), which Inductor on the CPU otherwise runs without CUDA graphs;
its generation is torch's own (cudagraph_trees' mark-step counter, else Dynamo's GenerationTracker), and at the first
such call of a new generation every floating output of the earlier generation is overwritten (its memory, whoever
holds it).
An output that shares storage with one of the call's inputs (a parameter, a static input) is never touched, as CUDA
graph trees leave static inputs alone. Not emulated: the pool's sizes and addresses, warm-up runs, recording.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
import tuc_hooks


class _Pool:
    generation: Any = None
    # outputs of the current generation, held: AOTAutograd's wrappers may hand the caller another tensor object on the
    # same memory and drop this one, and the memory is what the next generation reuses
    live: ClassVar[list[torch.Tensor]] = []


def _generation() -> Any:
    from torch._dynamo.mutation_guard import GenerationTracker
    from torch._inductor.cudagraph_trees import MarkStepBox

    return ("step", MarkStepBox.mark_step_counter) if MarkStepBox.mark_step_counter else ("call", GenerationTracker.generation)


def _overwrite_previous() -> None:
    """The previous generation's outputs, still held by someone, overwritten: their memory is the new generation's."""
    with torch.no_grad():
        for t in _Pool.live:
            if t.is_floating_point() and t.numel():
                t.detach().fill_(float("nan"))
    _Pool.live = []


def _storages(values: Any) -> set[int]:
    return {v.untyped_storage().data_ptr() for v in values if isinstance(v, torch.Tensor)}


def _patch(module: Any) -> None:
    graph = module.CompiledFxGraph
    post_compile, call = graph.post_compile, graph.__call__

    def post_compile_(self, *args: Any, **kwargs: Any) -> None:
        from torch._inductor import config

        # read while compile_fx's config patch is on; post_compile runs on a compiled graph and a cached one alike
        self._tuc_cudagraphs = bool(config.triton.cudagraphs)
        post_compile(self, *args, **kwargs)

    def __call__(self, inputs: Any) -> Any:
        if not getattr(self, "_tuc_cudagraphs", False):
            return call(self, inputs)
        now = _generation()
        if now != _Pool.generation:
            _overwrite_previous()
            _Pool.generation = now
        static = _storages(inputs)  # before the call: a boxed call empties its inputs list
        out = call(self, inputs)
        for o in out if isinstance(out, (list, tuple)) else ():
            if isinstance(o, torch.Tensor) and o.untyped_storage().data_ptr() not in static:
                _Pool.live.append(o)
        return out

    graph.post_compile, graph.__call__ = post_compile_, __call__


def install() -> None:
    # not imported here: Inductor's config sizes its compile pool on import, before the worker pins its CPUs
    tuc_hooks.once_imported("torch._inductor.output_code", _patch)
