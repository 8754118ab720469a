"""The built-in suite as data: workload names, their dtypes and aspects, and planning (stdlib only).

Names here are stable: they appear in reports, JUnit files and `--only` patterns.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass, replace

from torch_upgrade_check.aspects import FIRST_DTYPE_ONLY, FLOAT32_ONLY, LAST, TRAINING_ASPECTS
from torch_upgrade_check.model import CheckSpec

# models with parameters and a loss: a training job checkpoints them
TRAINED_ASPECTS = ("numerics", "cross-backend", "compile", "determinism", "checkpoint", "training-curve", "amp",
                   "latency", "memory", "warnings")
MODEL_ASPECTS = tuple(a for a in TRAINED_ASPECTS if a not in TRAINING_ASPECTS)
# the opt-in compiled aspects where they are cheap: compile-cache on matmul (a cold compile of 0.1-0.2 s, no C++ kernel
# to build: about 4 s a check with its second process; a small MLP's took 20-30 s on the shared 2-core machine), and
# compiled-latency on mlp (Inductor fuses its GELU: compiled code of its own; compiled once a worker, 1-10 s)
OP_ASPECTS = ("numerics", "cross-backend", "compile", "compile-cache", "latency", "memory", "warnings")
# deployment artifacts (export; jit traced) for the float32 built-in models whose artifacts build cheaply (a fresh
# process each: seconds); transformer_block does not trace (its graph differs between calls), so has export only
BUILTIN_ARTIFACTS = ("export", "jit")
# compile-mode: compile again in the mode teams ship for speed (model.COMPILE_MODE_OF), for the built-ins whose compile
# is cheap (a compile of the forward and the training step: a few seconds on a 2-core CPU); FlexAttention's alone take
# half a minute
MODE = ("compile-mode",)


@dataclass(frozen=True)
class Workload:
    """A workload and what to run it through. `factory` is "module:function" ("" for built-ins)."""

    name: str
    dtypes: tuple[str, ...]
    aspects: tuple[str, ...]
    description: str = ""
    factory: str = ""


BUILTIN: tuple[Workload, ...] = (
    Workload("mlp", ("float32",), (*TRAINED_ASPECTS, *MODE, "compiled-latency", *BUILTIN_ARTIFACTS, "dataloader"),
             "3-layer MLP with GELU, forward and backward; compiled with its batch dimension dynamic (batches 32, 8, "
             "48); its dataset through DataLoader workers"),
    Workload("cnn", ("float32",), (*TRAINED_ASPECTS, "export"), "small conv net: conv, batch norm, pooling, linear head"),
    Workload(
        "transformer_block",
        ("float32",),
        (*TRAINED_ASPECTS, "fsdp2", "export"),
        "nn.TransformerEncoderLayer, forward and backward; FSDP2 fully_shard vs unsharded",
    ),
    Workload("sdpa", ("float32", "bfloat16"), (*MODEL_ASPECTS, "sdpa-backends"),
             "scaled_dot_product_attention, causal; every SDPA backend the device offers"),
    Workload("flex_attention_none", ("float32",), MODEL_ASPECTS, "FlexAttention, no mask, vs math attention"),
    Workload("flex_attention_causal", ("float32",), (*MODEL_ASPECTS, "deterministic-backward"),
             "FlexAttention, causal block mask; deterministic compiled backward on CUDA"),
    Workload("flex_attention_sliding_window", ("float32",), (*MODEL_ASPECTS, "deterministic-backward"),
             "FlexAttention, causal sliding window; deterministic compiled backward on CUDA"),
    Workload("flex_attention_alibi", ("float32",), MODEL_ASPECTS, "FlexAttention, ALiBi score_mod"),
    Workload("matmul", ("float32", "float16", "bfloat16"), (*OP_ASPECTS, *MODE), "dense matmul"),
)

BUILTIN_NAMES = tuple(w.name for w in BUILTIN)


def plan(workloads: Sequence[Workload], device: str, only: Sequence[str] = ()) -> list[CheckSpec]:
    """Every (workload, dtype, aspect) on `device`, in suite order, filtered by `only` globs.

    A pattern matches a check if it matches its id (`mlp[float32]/latency`), its workload name or
    its aspect, so `--only 'flex*'`, `--only latency` and `--only 'mlp[float32]/*'` all work.
    On CUDA every built-in float32 workload also gets `[tf32]/numerics`: TF32 checked on its own,
    with tolerances fit for it, while every float32 check runs in IEEE float32.
    """
    specs = []
    for w in workloads:
        for dtype, aspects in _variants(w, device):
            for aspect in sorted(aspects, key=lambda a: a in LAST):
                spec = CheckSpec(workload=w.name, aspect=aspect, device=device, dtype=dtype, factory=w.factory)
                if not only or any(_matches(p, spec) for p in only):
                    specs.append(spec)
    return specs


def with_compile_time(w: Workload) -> Workload:
    """`--compile-time`: the workload also gets the opt-in compile-time aspect, where it has compile."""
    if "compile" not in w.aspects or "compile-time" in w.aspects:
        return w
    at = w.aspects.index("compile") + 1
    return replace(w, aspects=(*w.aspects[:at], "compile-time", *w.aspects[at:]))


def with_ddp(w: Workload) -> Workload:
    """`--ddp`: the workload also gets the opt-in ddp aspect (torchrun, 2 ranks), where it has fsdp2."""
    if "fsdp2" not in w.aspects or "ddp" in w.aspects:
        return w
    at = w.aspects.index("fsdp2") + 1
    return replace(w, aspects=(*w.aspects[:at], "ddp", *w.aspects[at:]))


def rerun_pattern(workload: str, dtype: str, aspect: str) -> str:
    """The `--only` pattern that runs a check again as it ran: its id, or for `warnings` (which reports what
    the workload's other checks raised) every check of that workload and dtype."""
    return f"{workload}[{dtype}]/" + ("*" if aspect in LAST else aspect)


def _variants(w: Workload, device: str) -> list[tuple[str, tuple[str, ...]]]:
    variants = [(dtype, tuple(a for a in w.aspects if (dtype == "float32" or a not in FLOAT32_ONLY)
                              and (dtype == w.dtypes[0] or a not in FIRST_DTYPE_ONLY))) for dtype in w.dtypes]
    if device == "cuda" and not w.factory and "float32" in w.dtypes and "tf32" not in w.dtypes and "numerics" in w.aspects:
        variants.append(("tf32", ("numerics",)))
    return variants


def selected(spec: CheckSpec, only: Sequence[str]) -> bool:
    """Whether `--only` patterns (none: everything) select a check, as `plan` selects them."""
    return not only or any(_matches(p, spec) for p in only)


def _matches(pattern: str, spec: CheckSpec) -> bool:
    # fnmatch treats [...] as a character class; check ids contain literal brackets.
    literal = pattern.replace("[", "[[]") if "[" in pattern and "]" in pattern else pattern
    return any(fnmatch.fnmatchcase(s, literal) for s in (spec.id, spec.workload, spec.aspect))
