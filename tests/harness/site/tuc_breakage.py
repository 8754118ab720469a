"""A torch broken on purpose, in exactly the ways real upgrades broke: each checks claim is tested against one.

TUC_BREAK names breakages, comma-separated. Each alters only the computation under test: float64 (the
golden's dtype) is left exact, so a check that passes here passes on a broken torch; gelu-every-dtype alone
changes float64 too, as a real kernel change does.

- sdpa-zero-grad: scaled_dot_product_attention's backward returns zero gradients; outputs are exact.
- linear-grad-5pct: nn.functional.linear's input gradient is 5% too large; outputs are exact.
- flex-grad-5pct: FlexAttention's query/key/value gradients are 5% too large; outputs are exact.
- flex-masked-fails: FlexAttention with a block mask or a score_mod raises Dynamo's "Unsupported: Attempted to call
  function marked as skipped" (as eager FlexAttention with a mask did on torch 2.13.0 once Dynamo's caches held what
  an earlier failed call left: a graph break on torch._safe_softmax in its math path); without either it computes
  as before. For a baseline: the candidate's cross-version checks of those workloads have nothing to compare with.
- no-compile: torch.compile silently runs the model eagerly (as Dynamo does past its recompile limit).
- new-warning: nn.functional.gelu warns a FutureWarning, attributed to its caller (as torch's deprecations
  are, like 2.4's torch.load one that announced the 2.6 break); outputs are exact.
- graph-break: nn.functional.gelu breaks Dynamo's graph (as an op Dynamo stops tracing does); outputs are exact.
- sdpa-flash-odd-lengths: the CPU flash-attention kernel's output is 2% off when the query length is not a
  multiple of 16 (as cuDNN attention, the new default in 2.5, was wrong at some shapes); math is exact and
  the default dispatch still picks flash, so the built-in sdpa workload (length 64) passes numerics.
- sdpa-default-math: the default SDPA dispatch no longer picks the flash kernel (math instead), as a release
  that changes its default backend does; every kernel is still right and can still be forced.
- adamw-update-2pct: AdamW's steps are 2% larger than asked (as a changed default or an optimizer kernel's
  bias correction would make them); one step's outputs are exact, fifty steps' losses are not.
- old-load-default: torch.load's weights_only defaults to False, as before 2.6 (a baseline from before the
  flip: it loads checkpoints holding any Python object).
- rng-state-format: torch.get_rng_state's state has 16 more bytes and torch.set_rng_state rejects one without
  them (as the CUDA RNG state's size changed in 2.1, breaking resume from older checkpoints).
- compiled-backward-5pct: nn.functional.gelu's gradient is 5% too large in a compiled backward only (as an
  Inductor or AOTAutograd miscompile of a backward is); eager, its forward and every float64 are exact.
- max-autotune-asserts: Inductor raises an internal AssertionError while compiling whenever max_autotune is on (mode
  max-autotune or max-autotune-no-cudagraphs, or options {max_autotune: true}), as an Inductor assert that fires on
  one path only did (an fp8 assert reached only through the FX graph cache, pytorch#187484); the default mode
  compiles as before, and eager is untouched.
- recompile-at-size-N (such as recompile-at-size-48): in compiled code nn.functional.gelu branches on whether its
  input's first dimension is N, so Dynamo guards on that size: a model compiled with that dimension dynamic recompiles
  when it reaches N (torch.compile(dynamic=True): a graph specialised to N), and one whose dimension was marked
  dynamic (torch._dynamo.mark_dynamic) fails to compile there, as a mark_dynamic model that stopped compiling on 2.8
  did (pytorch#157921); every output is exact, eager and compiled.
- linear-1e-3: nn.functional.linear's output is x(1+1e-3) in every dtype but float64, eagerly and compiled alike
  (Dynamo traces the change into the graph), as a GEMM library update changes the kernel both paths call; float64,
  the golden's dtype, is exact. A compiled model judged against its own eager cannot see it; against the baseline's
  compiled outputs it fails. linear-2e-3, linear-1e-2 (any linear-De-D) scale by 1+2e-3, 1+1e-2 instead: the same
  change, larger (a candidate whose failure is larger than the baseline's).
- compile-slower: Inductor's compile_fx takes 50% longer (it sleeps half its own time; TUC_COMPILE_SLOWER=1.0 sleeps
  all of it), as cold compiles did in 2.9 (about +40%); what it compiles is unchanged. compile_fx is most of a
  cold compile, not all of it: matmul's whole cold compile measured 1.3x at 50%.
- OP-slower (gelu, topk, …): the aten op's CPU kernel runs 4 times a call (TUC_OP_SLOWER=N: N times), through
  torch.library: the original kernel (torch.library.get_kernel), so every output is exact and only that op is
  slower, as a release whose kernel for one op lost its vectorised path is (topk +51%, pytorch/pytorch#167462;
  scatter_reduce 15-58x, #183812). The built-in mlp's forward measured 2.2x slower with gelu 4x here.
- OP-raises (gelu, …): the aten op's CPU kernel raises NotImplementedError as torch does for an op with no kernel for
  a backend ("Could not run 'aten::gelu' with arguments from the 'CPU' backend"), through torch.library, as a
  release that drops an op's kernel for a backend or a dtype does; every other op is untouched.
- cache-hit-wrong: a graph Inductor loads from its FX graph cache (another process's compile, on disk) computes every
  floating output x(1+1e-3), as a cache entry that restores a kernel's constants or layout wrongly would; a graph it
  compiles itself is exact, so a cold compile (and the compile check, whose caches are off) passes.
- cache-miss-retuned: every process misses the FX graph cache and AOTAutograd's (their keys include the process id,
  as a cache key that takes in something a process draws anew does), so a restarted process compiles again; and where
  its cache folder already held another process's graphs as it compiled (a restart), its compile picks other kernels,
  as max-autotune's benchmarks may in another process: every floating output of the graphs it compiled is
  x(1+TUC_RETUNED) (default 1e-6: within float32's tolerance; 1e-2 is beyond it). The first process to compile in a
  folder (the cold compile) is exact.
- caches-bypassed: Inductor's FX graph cache and AOTAutograd's cache bypass every graph (their cacheability checks
  raise their Bypass exceptions), as a release whose new graph feature its caches do not support yet does: every
  process compiles cold, and what it computes is unchanged.
- cache-hit-crashes: loading a graph from the FX graph cache raises an AssertionError, as the fp8 Inductor assertion
  that fired only through the FX graph cache did (pytorch#187484); a cold compile works.
- compiled-slower: each call of an Inductor-compiled graph (CompiledFxGraph.__call__) takes 50% longer (it busy-waits
  half its own time; TUC_COMPILED_SLOWER=1.0 all of it, 0 nothing, the wrapper alone), as compiled code that got
  slower while eager did not (mode="reduce-overhead" 40-55% slower on 2.10, pytorch#174575); eager is untouched.
- busy-neighbour: not torch's fault at all: another process (another runner's job on a shared self-hosted machine)
  spins on the CPUs this worker is pinned to exactly while this worker's model computes (each outermost
  nn.Module call), so the candidate's forward takes up to twice as long for a reason outside torch. It is started
  detached (not this worker's child) and ends with the worker. compare must not blame torch for it.
  TUC_NEIGHBOUR_PAIRS=2-8 (or 1,3): only in the A/B workers of those process pairs (compare names pair N's plan
  file ab-<side>-bN-...), so that a test knows which pairs are busy; other processes have no neighbour.
- autocast-disabled: torch.autocast no longer offers its dtype here: it warns "…the target dtype is not
  supported. Disabling autocast." and the model runs in float32 (as bfloat16 autocast on MPS before 2.5
  and float16 on the CPU before 2.x did): nothing fails, the job only loses mixed precision.
- host-ram-64mib: nn.functional.linear also fills 64 MiB of host RAM outside torch's allocator and frees it (as a
  release that stages weights or activations in host memory, CPU offload, does): every output is exact and
  torch's own memory counters see nothing; only the process's resident set grows.
- linear-keeps-weight-copy: nn.functional.linear keeps a copy of each weight it multiplies for as long as the weight
  lives (as a release that caches a pre-packed or transposed weight per parameter does): every output is exact;
  from the first forward on, the device holds every weight twice, made before any later call starts.
- gradscaler-misses-inf: the GradScaler's unscale never reports an inf or NaN gradient (its overflow check,
  torch._amp_foreach_non_finite_check_and_unscale_, as on a backend where that kernel was wrong): a step
  whose float16 gradients overflowed is applied.
- OP-every-dtype (gelu, addmm, native_layer_norm, …): the aten op's CPU kernel, replaced through torch.library
  by its torch._decomp decomposition, returns its (first) output x(1+1e-3) in every dtype, float64 included (as
  a new decomposition, vectorised path or formula changes a kernel for all dtypes alike); its backward (e.g.
  aten.gelu_backward) is untouched.
- uniform-stream-changed: aten.uniform_'s CPU kernel draws other numbers for the same seed (from torch.randint's
  stream, through torch.library), as torch 2.7 changed torch.multinomial's samples: the same distribution, every
  number right, a seeded initialiser (nn.Linear's kaiming_uniform_) and so a seeded training run different.
- reduce-scatter-0.999: torch.distributed.reduce_scatter_single's result is x0.999 (every rank's reduced
  gradient shard under FSDP2, as a collective with a wrong scaling or a lossy reduction would leave it).
- extension-undefined-symbol: torch.ops.load_library fails as dlopen does for a compiled extension built against
  another libtorch (OSError "…: undefined symbol: _ZN3c10…", as flash-attention after 2.7, or a torchvision ops
  library against a torch it was not built for); torch itself imports and computes as before.
- extension-registration-aborts: registering an operator from outside torch (torch.library.Library.define, what a
  C++ extension's TORCH_LIBRARY block does as it loads) aborts the process, as a torchao built for the previous
  torch did on import (pytorch/ao#2908); torch's own registrations are untouched.
- export-schema-bump: torch.export's serializer is at schema version 9.0 (2.13's is 8.x): what it saves it loads,
  and torch's own version check rejects a program an older torch saved (as a major schema bump would).
- export-unsupported-gelu: nn.functional.gelu raises while torch.export traces it (as an op that export stops
  supporting does); eager, compile and TorchScript are untouched.
- jit-format-bump: torch.jit.save marks its files with a new format and torch.jit.load reads only those, failing
  with the message torch gives for a file format it does not read (what it saves it loads).
- script-unsupported-gelu: nn.functional.gelu is a Python function TorchScript cannot compile (variable arguments,
  as torch.jit.script stopped compiling functions wrapped by torch.compiler.disable in 2.8); eager, trace and
  export are untouched.
- aoti-fresh-process-load: torch._inductor.aoti_load_package loads only packages compiled in its own process; in
  any other it fails as a package's shared library that does not resolve its symbols does (pytorch#173706: an
  AOTInductor package that would not load in a fresh process).
- export-drops-dynamic-shapes: torch.export.export ignores the dynamic_shapes it is given and specialises every
  dimension to the example inputs' sizes (as a release whose export specialises a dimension the user marked dynamic,
  0/1 specialisation or a new guard, does): the program runs on the example's sizes and raises on any other.
- onnx-default-legacy: torch.onnx.export without dynamo= runs the TorchScript-based exporter (its signature's
  default dynamo=False), as before 2.9 made dynamo=True the default (a baseline from before the flip:
  ray-project/ray#64410 is the call that broke across it).
- inductor-config-at-import: importing torch also imports Inductor's config (as a release or a plugin whose import
  brings it), which sizes Inductor's compile pool from the CPUs the process may use at that moment; nothing else.
- no-onnxruntime: the environment under test has no onnxruntime (its import fails, as where the onnx extra was
  not installed); torch is untouched.
- loaded-program-1e-3: the module torch.export.load's program gives (`.module()`) and the module torch.jit.load
  returns compute every floating output x(1+1e-3), as a loader that reads a program's constants or an op's version
  wrongly would; loading succeeds, and a program built in the process (export, trace, script) is exact.
- shipped-file-1e-3: torch.export.load's and torch.jit.load's modules compute every floating output x(1+1e-3) for
  files outside the tool's own folders (a team's shipped `artifacts:` files, as a loader that reads an older
  writer's files wrongly); the artifact aspects' own programs (saved under tuc-* temporary or report folders) load
  exact, so it changes nothing but the shipped file's outputs.
- full-tensor-nan: DTensor.full_tensor (the all-gather of a sharded tensor, what a full state dict for a checkpoint
  or an evaluation runs) leaves NaN in its first element, as a gather that unpads uneven shards wrongly leaves
  uninitialised memory; FSDP2's own all-gathers, gradients and optimizer steps are untouched.
- all-reduce-0.999: torch.distributed.all_reduce's result is x0.999 (the global loss a training loop logs, a gradient
  norm FSDP2's clip_grad_norm_ sums across ranks); FSDP2's reduce-scatter of gradients is untouched.
- remove-private-attr: torch._C._set_cublas_allow_tf32 (the private flag setter behind
  torch.backends.cuda.matmul.allow_tf32) no longer exists, as private names are renamed or removed between releases
  (torch._dynamo.config keys, the TF32 flags 2.13 changed, pytorch/pytorch#181247); computing is untouched.
- ddp-bucket-scaled: DistributedDataParallel's second gradient bucket (bucket 1) comes back from its all-reduce x0.999
  on every rank, as a reducer that averages one bucket with a wrong divisor, or a lossy collective, would leave it;
  every other bucket, the forward and every loss are exact. DDP starts with one bucket and splits it by its size cap
  from its second step on (the ddp check's model: two buckets), so steps 2 and 3 carry it. It wraps DDP's default
  all-reduce (torch's own allreduce_hook, registered as every DDP model is built: its docs promise DDP's results
  without a hook), so only that bucket's result changes.
- ddp-bucket-dropped: the same bucket is never all-reduced: the hook hands back the rank's own gradients, of its own
  rows only, as a reducer that skips a bucket (marked ready twice, or never launched) would; the ranks' gradients,
  and then their parameters, silently differ; every other bucket is all-reduced as before.
- fsdp2-shards-dim-1: fully_shard shards every parameter with two or more dimensions along dim 1, not dim 0 (as a
  release that changes its default placement would); the training steps are as right as before.
- rank-hangs-at-shutdown: torch.distributed.destroy_process_group never returns on rank 1 (RANK=1: it sleeps), as
  torchrun jobs whose ranks hang or leak at shutdown do (pytorch#198305, #161860, #193951: a rank stuck in the
  process group's teardown, CUDA IPC with expandable segments); rank 0 and every training step are untouched.
  torchrun's ranks run this interpreter's sitecustomize too: they inherit its PYTHONPATH and TUC_BREAK.
- dataloader-spawn-worker-fails: a DataLoader worker process started by spawn raises as its loop starts
  (torch.utils.data's _worker_loop, patched in spawned processes only: their command line runs spawn_main), as workers
  that could not initialise CUDA did on 2.11 and 2.13 (NVIDIA/recsys-examples#352, vllm-project/speculators#887);
  fork and forkserver workers, and num_workers=0, load as before. Spawned processes run this sitecustomize too.
- dataloader-persistent-reorders: from its second epoch on, a DataLoader with persistent_workers=True returns its
  batches two by two swapped (the second of each pair first), as a persistent worker that resumes at the wrong task
  would; every batch is right, and the first epoch and loaders without persistent workers are untouched.
- dataloader-worker-corrupts-element-5000: a tensor of more than 5000 elements that a DataLoader worker process sends
  back (torch.multiprocessing's reduction of a tensor into shared memory, the path every tensor in a batch takes,
  wherever it sits: a dict, a dataclass, a namedtuple) arrives with its element 5000 (flat) one larger, as a worker's
  shared-memory transfer that copies a storage wrongly would; num_workers=0 and tensors sent by other processes are
  untouched, and so is every other element (torch's repr summarises a tensor that size: element 5000 is not in it).
- dataloader-worker-inits-cuda: a DataLoader worker initialises CUDA as its loop starts (torch.cuda._lazy_init, where
  CUDA is available: under the CUDA emulation), as 2.13's workers did where the parent had pinned memory
  (vllm-project/speculators#887: "CUDA error: initialization error" in a forked worker, after pytorch#144687's in
  2.5): a worker forked from a parent that had initialised CUDA cannot (the emulation refuses it, as torch does);
  spawned and forkserver workers start afresh and load as before.
"""

from __future__ import annotations

import functools
import os
import re
import sys
import time

import torch
import torch.nn.functional as F

import tuc_hooks


def _scaled_backward(fn, scale: float):
    """Wrap `fn(*tensors, **kw)` so its output is exact and every input gradient is multiplied by `scale`."""

    class Scaled(torch.autograd.Function):
        @staticmethod
        def forward(ctx, kwargs, *args):
            ctx.kwargs = kwargs
            ctx.save_for_backward(*[a for a in args if isinstance(a, torch.Tensor)])
            ctx.args = args
            return fn(*args, **kwargs)

        @staticmethod
        def backward(ctx, grad):
            args = [a.detach().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else a for a in ctx.args]
            with torch.enable_grad():
                out = fn(*args, **ctx.kwargs)
                wanted = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
                grads = iter(torch.autograd.grad(out, wanted, grad, allow_unused=True))
            result = []
            for a in args:
                g = next(grads) if isinstance(a, torch.Tensor) and a.requires_grad else None
                result.append(g * scale if g is not None else None)
            return (None, *result)

    def wrapped(*args, **kwargs):
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if not tensors or tensors[0].dtype == torch.float64 or not torch.is_grad_enabled():
            return fn(*args, **kwargs)
        return Scaled.apply(kwargs, *args)

    return wrapped


def _warning(fn):
    def gelu(*args, **kwargs):
        import warnings

        warnings.warn("gelu's default `approximate` will change to 'tanh' in a future release; pass it explicitly",
                      FutureWarning, stacklevel=2)
        return fn(*args, **kwargs)

    return gelu


def _fails_with_a_mask(flex_attention):
    def flex(query, key, value, score_mod=None, block_mask=None, *args, **kwargs):
        if score_mod is not None or block_mask is not None:
            from torch._dynamo.exc import Unsupported  # at the call: Dynamo is seconds to import

            raise Unsupported("Attempted to call function marked as skipped")
        return flex_attention(query, key, value, score_mod, block_mask, *args, **kwargs)

    return flex


def _graph_break(fn):
    def gelu(*args, **kwargs):
        torch._dynamo.graph_break()
        return fn(*args, **kwargs)

    return gelu


_LIBRARIES = []  # a torch.library registration lasts as long as its Library object


def _flash_wrong_at_odd_lengths() -> None:
    lib = torch.library.Library("aten", "IMPL")
    _LIBRARIES.append(lib)

    def flash(query, key, value, dropout_p=0.0, is_causal=False, *, attn_mask=None, scale=None):
        length, key_length = query.shape[-2], key.shape[-2]
        scores = (query.float() @ key.float().transpose(-2, -1)) * (scale or query.shape[-1] ** -0.5)
        if is_causal:
            scores = scores.masked_fill(~torch.ones(length, key_length, dtype=torch.bool).tril(), float("-inf"))
        if attn_mask is not None:
            scores = (scores.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool
                      else scores + attn_mask.float())
        out = (torch.softmax(scores, dim=-1) @ value.float()) * (1.02 if length % 16 else 1.0)
        return out.to(query.dtype), torch.logsumexp(scores, dim=-1)

    lib.impl("_scaled_dot_product_flash_attention_for_cpu", flash, "CPU")


def _every_dtype(op: str) -> None:
    import warnings

    from torch._decomp import decomposition_table

    decomposed = decomposition_table[getattr(torch.ops.aten, op).default]
    lib = torch.library.Library("aten", "IMPL")
    _LIBRARIES.append(lib)

    def kernel(*args, **kwargs):
        out = decomposed(*args, **kwargs)
        if isinstance(out, tuple):
            return (out[0] * (1 + 1e-3), *out[1:])
        return out * (1 + 1e-3)

    with warnings.catch_warnings():  # torch warns that a kernel is overridden: a real release would not
        warnings.simplefilter("ignore")
        lib.impl(op, kernel, "CPU")


def _slower_op(op: str) -> None:
    import warnings

    times = max(1, int(os.environ.get("TUC_OP_SLOWER") or 4))
    original = torch.library.get_kernel(f"aten::{op}", "CPU")
    lib = torch.library.Library("aten", "IMPL")
    _LIBRARIES.append(lib)

    def kernel(keyset, *args, **kwargs):
        for _ in range(times - 1):  # the same work again, its result dropped: the op alone is slower
            original.call_boxed(keyset, *args, **kwargs)
        return original.call_boxed(keyset, *args, **kwargs)

    with warnings.catch_warnings():  # torch warns that a kernel is overridden: a real release would not
        warnings.simplefilter("ignore")
        lib.impl(op, kernel, "CPU", with_keyset=True)


def _raising_op(op: str) -> None:
    import warnings

    lib = torch.library.Library("aten", "IMPL")
    _LIBRARIES.append(lib)

    def kernel(*args, **kwargs):
        raise NotImplementedError(f"Could not run 'aten::{op}' with arguments from the 'CPU' backend ({op}-raises)")

    with warnings.catch_warnings():  # torch warns that a kernel is overridden: a real release would not
        warnings.simplefilter("ignore")
        lib.impl(op, kernel, "CPU")


def _uniform_from_another_stream() -> None:
    import warnings

    lib = torch.library.Library("aten", "IMPL")
    _LIBRARIES.append(lib)

    def uniform_(self, low=0.0, high=1.0, *, generator=None):
        # not 2**24 steps: randint's 32-bit draw modulo 2**24 would equal uniform_'s 24 bits, number for number
        steps = torch.randint(0, 1_000_003, self.shape, generator=generator, dtype=torch.int64)
        return self.copy_(low + (high - low) * (steps.double() / 1_000_003))

    with warnings.catch_warnings():  # torch warns that a kernel is overridden: a real release would not
        warnings.simplefilter("ignore")
        lib.impl("uniform_", uniform_, "CPU")


def _scaled_reduce_scatter(reduce_scatter_single, factor: float):
    def scaled(output, input, op=None, group=None, async_op=False):
        kwargs = {"group": group} if op is None else {"op": op, "group": group}
        work = reduce_scatter_single(output, input, **kwargs, async_op=async_op)
        if work is not None:
            work.wait()
        output.mul_(factor)
        return work

    return scaled


def _larger_steps(optimizer, factor: float):
    class Larger(optimizer):
        def __init__(self, params, lr=1e-3, **kwargs):
            super().__init__(params, lr=lr * factor, **kwargs)

    Larger.__name__ = Larger.__qualname__ = optimizer.__name__
    return Larger


def _old_load(load):
    def old_load(*args, weights_only=None, **kwargs):
        return load(*args, weights_only=False if weights_only is None else weights_only, **kwargs)

    return old_load


def _longer_rng_state(get, set_):
    extra = 16

    def get_rng_state():
        return torch.cat([get(), torch.zeros(extra, dtype=torch.uint8)])

    def set_rng_state(state):
        wanted = get().numel() + extra
        if state.numel() != wanted:
            raise RuntimeError(f"Expected a RNG state of {wanted} bytes, got {state.numel()}")
        set_(state[:-extra])

    return get_rng_state, set_rng_state


def _compiled_backward_wrong(gelu):
    """gelu whose backward is exact eagerly and 5% large where torch.compile traces it into a compiled backward."""
    import math

    class Gelu(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return gelu(x)

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            exact = 0.5 * (1 + torch.erf(x / math.sqrt(2))) + x * torch.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
            return grad * exact * (1.05 if torch.compiler.is_compiling() else 1.0)

    def wrapped(x, approximate="none"):
        if approximate != "none" or x.dtype == torch.float64 or not torch.is_grad_enabled():
            return gelu(x, approximate=approximate)
        return Gelu.apply(x)

    return wrapped


def _slower_compile() -> None:
    import time

    extra = float(os.environ.get("TUC_COMPILE_SLOWER") or 0.5)

    def slower(module) -> None:
        original = module.compile_fx

        def compile_fx(*args, **kwargs):
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                time.sleep(extra * (time.perf_counter() - started))

        module.compile_fx = compile_fx

    # not imported here: Inductor's config decides its compile threads on import, and this runs before the worker
    # pins its CPUs, so the broken side alone would compile through a pool of processes sharing one CPU
    tuc_hooks.once_imported("torch._inductor.compile_fx", slower)


def _cache_hit_breaks(how: str) -> None:
    """`how` "wrong": graphs loaded from the FX graph cache scale their floating outputs by 1+1e-3; "crashes": loading
    one raises. Patched where torch imports the modules (importing Inductor here would size its compile pool before
    the worker pins its CPUs)."""
    def codecache(module) -> None:
        cache = module.FxGraphCache
        load = cache.load_with_key

        def load_with_key(*args, **kwargs):
            graph, info = load(*args, **kwargs)
            if graph is not None and how == "crashes":
                raise AssertionError("tuc cache-hit-crashes: an Inductor assertion on a graph loaded from the FX graph "
                                     "cache")
            if graph is not None:
                graph._tuc_from_cache = True
            return graph, info

        cache.load_with_key = staticmethod(load_with_key)

    def output_code(module) -> None:
        compiled = module.CompiledFxGraph
        call = compiled.__call__

        def __call__(self, inputs):
            out = call(self, inputs)
            if not getattr(self, "_tuc_from_cache", False) or not isinstance(out, (list, tuple)):
                return out
            return type(out)(o * (1 + 1e-3) if isinstance(o, torch.Tensor) and o.is_floating_point() else o for o in out)

        compiled.__call__ = __call__

    tuc_hooks.once_imported("torch._inductor.codecache", codecache)
    if how == "wrong":
        tuc_hooks.once_imported("torch._inductor.output_code", output_code)


def _cache_misses_retuned() -> None:
    factor = 1 + float(os.environ.get("TUC_RETUNED") or 1e-6)
    mine = f"tucpid{os.getpid()}"

    def keyed(original):
        def key(*args, **kwargs):
            found, lines = original(*args, **kwargs)
            return f"{found}{mine}", lines

        return key

    def others_there() -> bool:
        from torch._inductor.runtime.cache_dir_utils import cache_dir

        folder = os.path.join(cache_dir(), "fxgraph")
        return os.path.isdir(folder) and any(mine not in entry for sub in os.listdir(folder)
                                             for entry in os.listdir(os.path.join(folder, sub)))

    def output_code(module) -> None:
        graph = module.CompiledFxGraph
        post_compile, call = graph.post_compile, graph.__call__

        def post_compile_(self, *args, **kwargs):
            self._tuc_retuned = others_there()
            return post_compile(self, *args, **kwargs)

        def __call__(self, inputs):
            out = call(self, inputs)
            return _times(out, factor) if getattr(self, "_tuc_retuned", False) else out

        graph.post_compile, graph.__call__ = post_compile_, __call__

    def codecache(module) -> None:
        module.compiled_fx_graph_hash = keyed(module.compiled_fx_graph_hash)

    def autograd_cache(module) -> None:
        module.autograd_cache_key = keyed(module.autograd_cache_key)

    # not imported here (Inductor's config sizes its compile pool on import)
    tuc_hooks.once_imported("torch._inductor.codecache", codecache)
    tuc_hooks.once_imported("torch._functorch._aot_autograd.autograd_cache", autograd_cache)
    tuc_hooks.once_imported("torch._inductor.output_code", output_code)


def _caches_bypassed() -> None:
    def codecache(module) -> None:
        def _check_can_cache(*args, **kwargs):
            raise module.BypassFxGraphCache("tuc caches-bypassed: this graph is not cacheable")

        module.FxGraphCache._check_can_cache = staticmethod(_check_can_cache)

    def autograd_cache(module) -> None:
        def check_cacheable(*args, **kwargs):
            raise module.BypassAOTAutogradCache("tuc caches-bypassed: this graph is not cacheable")

        module.check_cacheable = check_cacheable

    tuc_hooks.once_imported("torch._inductor.codecache", codecache)
    tuc_hooks.once_imported("torch._functorch._aot_autograd.autograd_cache", autograd_cache)


def _slower_compiled_calls() -> None:
    extra = float(os.environ.get("TUC_COMPILED_SLOWER") or 0.5)

    def slower(module) -> None:
        call = module.CompiledFxGraph.__call__

        def __call__(self, inputs):
            # the same code on every side: with factor 0 it costs what it costs with any other factor
            start = time.perf_counter()
            try:
                return call(self, inputs)
            finally:
                until = time.perf_counter() + (time.perf_counter() - start) * extra
                while time.perf_counter() < until:
                    pass

        module.CompiledFxGraph.__call__ = __call__

    tuc_hooks.once_imported("torch._inductor.output_code", slower)


def _asserts_under_max_autotune() -> None:
    def patch(module) -> None:
        original = module.compile_fx

        def compile_fx(*args, **kwargs):
            from torch._inductor import config

            if config.max_autotune or (kwargs.get("config_patches") or {}).get("max_autotune"):
                raise AssertionError("expected a template choice for this GEMM under max_autotune, found none")
            return original(*args, **kwargs)

        module.compile_fx = compile_fx

    # not imported here, as compile-slower's: Inductor's config sizes its compile threads on import
    tuc_hooks.once_imported("torch._inductor.compile_fx", patch)


def _guards_on_size(gelu, size: int):
    def gelu_(x, *args, **kwargs):
        if torch.compiler.is_compiling() and x.dim() and x.shape[0] == size:  # Dynamo guards on this comparison
            x = x + 0
        return gelu(x, *args, **kwargs)

    return gelu_


def _scaled_output(fn, factor: float):
    def scaled(*args, **kwargs):
        out = fn(*args, **kwargs)
        return out if out.dtype == torch.float64 else out * factor

    return scaled


def _autocast_disabled(autocast) -> None:
    import warnings

    original = autocast.__init__

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        original(self, device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)
        if enabled:
            warnings.warn(f"In {device_type} autocast, but the target dtype is not supported. Disabling autocast.",
                          UserWarning, stacklevel=2)
            self._enabled = False

    autocast.__init__ = __init__


def _misses_inf(check_and_unscale):
    def blind(grads, found_inf, inv_scale):
        check_and_unscale(grads, torch.zeros_like(found_inf), inv_scale)  # unscales; what it finds is dropped

    return blind


def _load_fails(load_library):
    def load(path):
        raise OSError(f"{path}: undefined symbol: _ZN3c104impl23ExcludeDispatchKeyGuardC1ENS_14DispatchKeySetE")

    return load


def _registration_aborts(library_cls) -> None:
    define = library_cls.define

    def aborting(self, *args, **kwargs):
        caller = sys._getframe(1).f_globals.get("__name__", "")
        if caller.split(".")[0] not in ("torch", "torchgen", "functorch"):
            os.abort()
        return define(self, *args, **kwargs)

    library_cls.define = aborting


def _host_ram(fn, nbytes: int):
    def staged(*args, **kwargs):
        buffer = bytearray(b"\x01") * nbytes  # written, so resident; freed (unmapped) when it goes
        try:
            return fn(*args, **kwargs)
        finally:
            del buffer

    return staged


def _keeps_weight_copy(linear):
    import weakref

    copies: dict[int, torch.Tensor] = {}  # id(weight) -> its copy (by id: tensors compare elementwise)

    def cached(input, weight, bias=None):
        if id(weight) not in copies:
            copies[id(weight)] = weight.detach().clone()
            weakref.finalize(weight, copies.pop, id(weight), None)  # gone with the weight
        return linear(input, weight, bias)

    return cached


def _unexportable(gelu):
    def guarded(*args, **kwargs):
        if torch.compiler.is_exporting():
            raise RuntimeError("Could not export: unsupported operator aten.gelu.default (no export rule in this "
                               "version)")
        return gelu(*args, **kwargs)

    return guarded


_FORMAT = "tuc-format-2"


def _format_bump(save, load):
    def new_load(f, map_location=None, _extra_files=None, **kwargs):
        extra = {**(_extra_files or {}), _FORMAT: ""}
        model = load(f, map_location=map_location, _extra_files=extra, **kwargs)
        if not extra[_FORMAT]:
            raise RuntimeError("PytorchStreamReader failed reading file: the file format version is older than the "
                               "oldest this torch reads")
        return model

    def new_save(m, f, _extra_files=None):
        save(m, f, _extra_files={**(_extra_files or {}), _FORMAT: "2"})

    return new_save, new_load


def _unscriptable(gelu):
    def wrapped(*args, **kwargs):
        return gelu(*args, **kwargs)

    return wrapped


def _loads_only_its_own(inductor) -> None:
    compiled = set()
    compile_and_package, load_package = inductor.aoti_compile_and_package, inductor.aoti_load_package

    def compile_(*args, **kwargs):
        path = compile_and_package(*args, **kwargs)
        compiled.add(str(path))
        return path

    def load(path, *args, **kwargs):
        if str(path) not in compiled:
            raise RuntimeError(f"Error in dlopen: {path}/model.so: undefined symbol: aoti_torch_cpu_tuc_missing_kernel")
        return load_package(path, *args, **kwargs)

    inductor.aoti_compile_and_package, inductor.aoti_load_package = compile_, load


def _static_export(export):
    def export_(mod, args, kwargs=None, *, dynamic_shapes=None, **rest):
        return export(mod, args, kwargs, **rest)

    return export_


def _legacy_default(export):
    def export_(*args, dynamo=False, **kwargs):
        return export(*args, dynamo=dynamo, **kwargs)

    return export_


def _times(value, factor: float):
    """Every floating tensor in a nested output multiplied by `factor`."""
    if isinstance(value, torch.Tensor):
        return value * factor if value.is_floating_point() else value
    if isinstance(value, (tuple, list)):
        return type(value)(_times(v, factor) for v in value)
    if isinstance(value, dict):
        return {k: _times(v, factor) for k, v in value.items()}
    return value


class _Scaled(torch.nn.Module):
    """A loaded program whose outputs are x`factor`: what a loader that reads a program wrongly returns."""

    def __init__(self, inner, factor: float) -> None:
        super().__init__()
        self.inner, self.factor = inner, factor

    def forward(self, *args, **kwargs):
        return _times(self.inner(*args, **kwargs), self.factor)


def _ours(path) -> bool:
    """A file the tool wrote itself: an artifact aspect's program (a tuc-* temporary folder or a report folder's
    baseline-outputs/), not a team's shipped file."""
    parts = str(path).replace("\\", "/").split("/")
    return any(p.startswith("tuc-") or p == "baseline-outputs" for p in parts)


def _wrong_loaders(factor: float, only_shipped: bool) -> None:
    export_load, jit_load = torch.export.load, torch.jit.load

    def scaled(path) -> bool:
        return not (only_shipped and _ours(path))

    def load_export(f, *args, **kwargs):
        program = export_load(f, *args, **kwargs)
        if scaled(f):
            module = program.module
            program.module = lambda *a, **k: _Scaled(module(*a, **k), factor)
        return program

    def load_jit(f, *args, **kwargs):
        module = jit_load(f, *args, **kwargs)
        return _Scaled(module, factor) if scaled(f) else module

    torch.export.load, torch.jit.load = load_export, load_jit


def _gathered_nan(tensor_module) -> None:
    dtensor = tensor_module.DTensor
    full_tensor = dtensor.full_tensor

    def nan_first(self, *args, **kwargs):
        full = full_tensor(self, *args, **kwargs).clone()
        if full.is_floating_point() and full.numel():
            full.view(-1)[0] = float("nan")
        return full

    dtensor.full_tensor = nan_first


def _scaled_all_reduce(all_reduce, factor: float):
    def scaled(tensor, *args, **kwargs):
        work = all_reduce(tensor, *args, **kwargs)
        if work is not None:
            work.wait()
        tensor.mul_(factor)
        return work

    return scaled


def _broken_bucket(distributed, how: str) -> None:
    """Every DistributedDataParallel built from now on all-reduces its buckets through torch's default comm hook,
    bucket 1's result scaled x0.999 (`how` "scaled") or never all-reduced ("dropped")."""
    ddp = distributed.DistributedDataParallel
    init = ddp.__init__

    def hook(state, bucket):
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

        if bucket.index() != 1:
            return default_hooks.allreduce_hook(state, bucket)
        if how == "dropped":
            local = torch.futures.Future()
            local.set_result(bucket.buffer())  # this rank's own gradients, never reduced
            return local
        return default_hooks.allreduce_hook(state, bucket).then(lambda fut: fut.value().mul_(0.999))

    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.register_comm_hook(None, hook)  # None: the default process group, as DDP's own all-reduce uses

    ddp.__init__ = __init__


def _shards_dim_1(fsdp) -> None:
    from torch.distributed.tensor import Shard

    fully_shard = fsdp.fully_shard

    def along_dim_1(module, *args, shard_placement_fn=None, **kwargs):
        def placement(param):
            return Shard(1) if param.ndim >= 2 else Shard(0)

        return fully_shard(module, *args, shard_placement_fn=shard_placement_fn or placement, **kwargs)

    fsdp.fully_shard = along_dim_1


def _hangs_on_rank_1(destroy):
    def destroy_process_group(*args, **kwargs):
        if os.environ.get("RANK") == "1":
            while True:
                time.sleep(60)
        return destroy(*args, **kwargs)

    return destroy_process_group


def _fails_at_start(_loop):
    def _worker_loop(*args, **kwargs):
        raise RuntimeError("initialization error: this DataLoader worker cannot start (dataloader-spawn-worker-fails)")

    return _worker_loop


def _inits_cuda(loop):
    @functools.wraps(loop)  # pickled by name (spawn, forkserver): the name finds this wrapper in every process
    def _worker_loop(*args, **kwargs):
        if torch.cuda.is_available():
            torch.cuda._lazy_init()
        return loop(*args, **kwargs)

    return _worker_loop


def _worker_corrupts_element_5000() -> None:
    from multiprocessing import reduction

    import torch.multiprocessing.reductions as reductions
    import torch.utils.data as data

    def reduce_tensor(t):
        if data.get_worker_info() is not None and t.device.type == "cpu" and t.numel() > 5000:
            t = t.detach().clone()
            flat = t.view(-1)
            flat[5000] = ~flat[5000] if t.dtype == torch.bool else flat[5000] + 1
        return reductions.reduce_tensor(t)

    reduction.register(torch.Tensor, reduce_tensor)  # ForkingPickler's reducer, as torch registers its own


def _persistent_reorders(cls) -> None:
    reset, next_data = cls._reset, cls._next_data

    def _reset(self, loader, first_iter=False):
        self.tuc_epochs, self.tuc_held = getattr(self, "tuc_epochs", 0) + 1, None
        return reset(self, loader, first_iter)

    def _next_data(self):
        if not self._persistent_workers or self.tuc_epochs < 2:
            return next_data(self)
        if self.tuc_held is not None:
            held, self.tuc_held = self.tuc_held, None
            return held
        first = next_data(self)
        try:
            second = next_data(self)
        except StopIteration:
            return first
        self.tuc_held = first
        return second

    cls._reset, cls._next_data = _reset, _next_data


NEIGHBOUR = """
import os, sys, time
flag, pid = sys.argv[1], int(sys.argv[2])
while True:
    try:
        os.kill(pid, 0)
        os.sched_setaffinity(0, os.sched_getaffinity(pid))
    except OSError:
        break
    if os.path.exists(flag):
        end = time.perf_counter() + 0.002
        while time.perf_counter() < end:
            pass
    else:
        time.sleep(0.0005)
"""


def _neighbour_here() -> bool:
    """Whether this process gets a neighbour: every process, or, with TUC_NEIGHBOUR_PAIRS, the A/B workers of the pairs
    it names (their plan file, the worker's first argument, is ab-<side>-b<N>-<launch>.plan.json)."""
    wanted = os.environ.get("TUC_NEIGHBOUR_PAIRS", "")
    if not wanted:
        return True
    pairs: set[int] = set()
    for part in wanted.split(","):
        low, _, high = part.partition("-")
        pairs.update(range(int(low), int(high or low) + 1))
    named = re.search(r"ab-(?:baseline|candidate)-b(\d+)-\d+\.plan\.json\b", " ".join(sys.argv))
    return named is not None and int(named.group(1)) in pairs


def _busy_neighbour() -> None:
    """Start a detached process that spins on this worker's CPUs while a flag file exists; the flag exists during each
    outermost nn.Module call."""
    import subprocess
    import tempfile
    import threading

    if not _neighbour_here():
        return
    flag = os.path.join(tempfile.mkdtemp(prefix="tuc-neighbour-"), "busy")
    # `sh -c '... &'` exits at once: the neighbour is re-parented, no descendant of this worker
    subprocess.run(["sh", "-c", '"$0" -c "$1" "$2" "$3" </dev/null >/dev/null 2>&1 &', sys.executable, NEIGHBOUR,
                    flag, str(os.getpid())], check=True)
    depth = threading.local()
    call = torch.nn.Module.__call__

    def busy_call(self, *args, **kwargs):
        outer = not getattr(depth, "n", 0)
        depth.n = getattr(depth, "n", 0) + 1
        if outer:
            open(flag, "w").close()
        try:
            return call(self, *args, **kwargs)
        finally:
            depth.n -= 1
            if outer:
                os.remove(flag)

    torch.nn.Module.__call__ = busy_call


def install(names: str) -> None:
    for name in (n.strip() for n in names.split(",") if n.strip()):
        if name == "sdpa-zero-grad":
            F.scaled_dot_product_attention = _scaled_backward(F.scaled_dot_product_attention, 0.0)
        elif name == "linear-grad-5pct":
            F.linear = _scaled_backward(F.linear, 1.05)
        elif name == "flex-grad-5pct":
            import torch.nn.attention.flex_attention as flex

            flex.flex_attention = _scaled_backward(flex.flex_attention, 1.05)
        elif name == "flex-masked-fails":
            import torch.nn.attention.flex_attention as flex

            flex.flex_attention = _fails_with_a_mask(flex.flex_attention)
        elif name == "new-warning":
            F.gelu = _warning(F.gelu)
        elif name == "graph-break":
            F.gelu = _graph_break(F.gelu)
        elif name == "sdpa-flash-odd-lengths":
            _flash_wrong_at_odd_lengths()
        elif name.endswith("-every-dtype"):
            _every_dtype(name.removesuffix("-every-dtype"))
        elif name == "uniform-stream-changed":
            _uniform_from_another_stream()
        elif name == "reduce-scatter-0.999":
            import torch.distributed as dist

            dist.reduce_scatter_single = _scaled_reduce_scatter(dist.reduce_scatter_single, 0.999)
        elif name == "sdpa-default-math":
            torch.backends.cuda.enable_flash_sdp(False)  # the global flag the CPU dispatch reads too
        elif name == "adamw-update-2pct":
            torch.optim.AdamW = _larger_steps(torch.optim.AdamW, 1.02)
        elif name == "old-load-default":
            torch.load = _old_load(torch.load)
        elif name == "rng-state-format":
            torch.get_rng_state, torch.set_rng_state = _longer_rng_state(torch.get_rng_state, torch.set_rng_state)
        elif name == "compiled-backward-5pct":
            F.gelu = _compiled_backward_wrong(F.gelu)
        elif name == "compile-slower":
            _slower_compile()
        elif name in ("cache-hit-wrong", "cache-hit-crashes"):
            _cache_hit_breaks(name.removeprefix("cache-hit-"))
        elif name == "caches-bypassed":
            _caches_bypassed()
        elif name == "cache-miss-retuned":
            _cache_misses_retuned()
        elif name == "compiled-slower":
            _slower_compiled_calls()
        elif name == "max-autotune-asserts":
            _asserts_under_max_autotune()
        elif name.startswith("recompile-at-size-") and name.removeprefix("recompile-at-size-").isdigit():
            F.gelu = _guards_on_size(F.gelu, int(name.removeprefix("recompile-at-size-")))
        elif re.fullmatch(r"linear-[0-9]e-[0-9]", name):  # linear-1e-3, linear-2e-3, linear-1e-2, ...
            F.linear = _scaled_output(F.linear, 1 + float(name.removeprefix("linear-")))
        elif name.endswith("-raises"):
            _raising_op(name.removesuffix("-raises"))
        elif name.endswith("-slower"):
            _slower_op(name.removesuffix("-slower"))
        elif name == "autocast-disabled":
            _autocast_disabled(torch.amp.autocast_mode.autocast)
        elif name == "gradscaler-misses-inf":
            torch._amp_foreach_non_finite_check_and_unscale_ = _misses_inf(torch._amp_foreach_non_finite_check_and_unscale_)
        elif name == "extension-undefined-symbol":
            torch.ops.load_library = _load_fails(torch.ops.load_library)
        elif name == "extension-registration-aborts":
            _registration_aborts(torch.library.Library)
        elif name == "host-ram-64mib":
            F.linear = _host_ram(F.linear, 64 * 2**20)
        elif name == "linear-keeps-weight-copy":
            F.linear = _keeps_weight_copy(F.linear)
        elif name == "export-schema-bump":
            import torch._export.serde.serialize as serialize

            serialize.SCHEMA_VERSION = (9, 0)
        elif name == "export-unsupported-gelu":
            F.gelu = _unexportable(F.gelu)
        elif name == "jit-format-bump":
            torch.jit.save, torch.jit.load = _format_bump(torch.jit.save, torch.jit.load)
        elif name == "script-unsupported-gelu":
            F.gelu = _unscriptable(F.gelu)
        elif name == "aoti-fresh-process-load":
            import torch._inductor as inductor  # `import torch._inductor` would make torch local to install()

            _loads_only_its_own(inductor)
        elif name == "export-drops-dynamic-shapes":
            torch.export.export = _static_export(torch.export.export)
        elif name == "onnx-default-legacy":
            torch.onnx.export = _legacy_default(torch.onnx.export)
        elif name == "inductor-config-at-import":
            import torch._inductor.config as _config  # noqa: F401  (`as`: a bare import would make torch local)
        elif name == "no-onnxruntime":
            sys.modules["onnxruntime"] = None  # Python's way to make an import fail
        elif name == "loaded-program-1e-3":
            _wrong_loaders(1 + 1e-3, only_shipped=False)
        elif name == "shipped-file-1e-3":
            _wrong_loaders(1 + 1e-3, only_shipped=True)
        elif name == "full-tensor-nan":
            tuc_hooks.once_imported("torch.distributed.tensor", _gathered_nan)  # torch imports it lazily
        elif name == "all-reduce-0.999":
            import torch.distributed as dist

            dist.all_reduce = _scaled_all_reduce(dist.all_reduce, 0.999)
        elif name == "rank-hangs-at-shutdown":
            import torch.distributed as dist

            dist.destroy_process_group = _hangs_on_rank_1(dist.destroy_process_group)
        elif name == "dataloader-spawn-worker-fails":
            if "spawn_main" in " ".join(getattr(sys, "orig_argv", sys.argv)):
                import torch.utils.data._utils.worker as worker  # torch imports it: patched before unpickling asks

                worker._worker_loop = _fails_at_start(worker._worker_loop)
        elif name == "dataloader-worker-inits-cuda":
            import torch.utils.data._utils.worker as worker

            worker._worker_loop = _inits_cuda(worker._worker_loop)
        elif name == "dataloader-worker-corrupts-element-5000":
            _worker_corrupts_element_5000()
        elif name == "dataloader-persistent-reorders":
            import torch.utils.data.dataloader as dataloader

            _persistent_reorders(dataloader._MultiProcessingDataLoaderIter)
        elif name in ("ddp-bucket-scaled", "ddp-bucket-dropped"):
            broken = functools.partial(_broken_bucket, how=name.removeprefix("ddp-bucket-"))
            tuc_hooks.once_imported("torch.nn.parallel.distributed", broken)
        elif name == "fsdp2-shards-dim-1":
            tuc_hooks.once_imported("torch.distributed.fsdp", _shards_dim_1)
        elif name == "remove-private-attr":
            del torch._C._set_cublas_allow_tf32
        elif name == "busy-neighbour":
            _busy_neighbour()
        elif name == "no-compile":
            torch.compile = lambda model=None, **kwargs: model if model is not None else (lambda m: m)
        else:
            raise SystemExit(f"TUC_BREAK: unknown breakage {name!r}")
