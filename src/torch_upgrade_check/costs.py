"""What a check of each aspect costs, as measured on the development machine: `--list` prints it beside every check,
and docs/benchmarks.md's table is the same figures (a test keeps them equal; no torch; pure)."""

from __future__ import annotations

from collections.abc import Iterable

MEASURED_ON = ("measured on a shared 2-core x86_64 CPU with torch 2.13.0+cpu (2026-12-01), while other jobs ran: "
               "a guide, not a promise")
# aspect -> (median seconds a check, the most a check took, a note): benchmarks/check_costs.py (`run` of the built-in
# suite, and of a small MLP with the opt-in aspects and two shipped files); cross-version from a compare of the
# built-ins (the candidate's side)
# (None: not measured here, and the note says why). Measured while three other jobs shared the 2 cores: the built-in
# suite took 293 s then, 82 s on the quiet machine, so these run high.
ASPECT_COST_S: dict[str, tuple[float | None, float | None, str]] = {
    "numerics": (0.8, 3.6, ""),
    "cross-backend": (None, None, "needs an accelerator: not measured here (skipped on a CPU)"),
    "cross-version": (0.2, 14, "compare only; the first of a worker the most"),
    "compile": (7.3, 28, "Inductor compiles of the forward and the training step; FlexAttention's take the most"),
    "compile-mode": (0.1, 1.2, "mlp and matmul compiled again in the device's mode, after their compile check (measured "
                               "alone, 2026-12-04, Inductor's cache empty)"),
    "determinism": (0.2, 0.3, ""),
    "deterministic-backward": (None, None, "CUDA only: not measured here"),
    "latency": (2.1, 6.0, ""),
    "op-latency": (0.9, 10, "compare only: the recorded ops timed on both sides, in 2 fresh process pairs the checks "
                            "share; the one that records first the most"),
    "memory": (0.3, 0.8, ""),
    "fsdp2": (46, 46, "torchrun and 2 processes (gloo)"),
    "ddp": (12, 12, "opt-in (--ddp): torchrun and 2 processes (gloo), 25 s of CPU"),
    "checkpoint": (0.7, 0.7, ""),
    "training-curve": (15, 21, "50 steps, twice"),
    "sdpa-backends": (3.0, 3.5, ""),
    "amp": (2.2, 4.1, ""),
    "dataloader": (10, 24, "6 DataLoaders of 2 workers: fork, spawn, forkserver, persistent workers off and on "
                           "(spawned workers import torch)"),
    "compile-time": (62, 62, "3 cold compiles of a small MLP, and a warm-up"),
    "compile-cache": (5.5, 27, "a cold compile and a second process's warm one: matmul's 5 s, a small MLP's C++ "
                               "kernels 12-27 s (2026-12-04, other jobs running)"),
    "compiled-latency": (2.0, 5.4, "one compile a worker (not timed), then as latency (2026-12-04, other jobs running)"),
    "warnings": (0.3, 0.5, ""),
    "resolve": (None, None, "your stack: one installer dry run a side (1.5 s with pip here, see Cost of a run)"),
    "imports": (None, None, "your stack: one process a top-level module"),
    "abi": (None, None, "your stack: reads every shared object that links torch"),
    "api": (5.4, 13, "opt-in (--scan): one process a side imports torch and reaches each name your code uses; "
                     "names under torch._dynamo the most"),
    "export": (7.4, 13, "the first of a worker imports torch.export in it and in the loader process"),
    "jit": (1.4, 1.4, ""),
    "aoti": (37, 37, "one AOTInductor compile of a small MLP"),
    "onnx": (9.4, 9.4, "dynamo=True, the first of a worker (imports of the exporter); the legacy exporter 0.1 s"),
    "artifact": (0.1, 0.2, "a checkpoint or a .pt2 program already imported"),
}
COMPARE_NOTE = ("in compare each check runs on both sides, and latency, compiled-latency, memory and compile-time are "
                "measured A/B within --ab-budget a check")


def estimate(aspect: str) -> str:
    """`~0.1 s`, `~0.2 s (up to 9 s)`, with what it covers; `?` for an aspect never measured."""
    if aspect not in ASPECT_COST_S:
        return "?"
    median, most, note = ASPECT_COST_S[aspect]
    if median is None or most is None:
        return note
    text = f"~{_seconds(median)}" + (f" (up to {_seconds(most)})" if most >= 2 * median and most - median >= 0.5 else "")
    return f"{text}; {note}" if note else text


def listing(checks: Iterable[tuple[str, str]], *, compare: bool = False) -> list[str]:
    """The `--list` lines: each check id with its aspect's estimate, then where the figures come from."""
    rows = list(checks)
    width = max((len(check) for check, _ in rows), default=0)
    lines = [f"{check:<{width}}  {estimate(aspect)}" for check, aspect in rows]
    return [*lines, f"# seconds a check, by aspect, {MEASURED_ON}" + (f"; {COMPARE_NOTE}" if compare else "")]


def _seconds(s: float) -> str:
    return f"{s:.1f} s" if s < 10 else f"{s:.0f} s"
