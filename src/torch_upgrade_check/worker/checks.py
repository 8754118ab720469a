"""The aspects: each runs one workload one way and returns raw metrics (no pass/fail decisions here)."""

from __future__ import annotations

import importlib
import inspect
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from torch_upgrade_check.model import CheckSpec
from torch_upgrade_check.worker import memory, tensors
from torch_upgrade_check.worker.workloads import BUILTIN

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "float64": torch.float64}


class Skip(Exception):
    """Raised by an aspect that does not apply here; the message is the reason shown to users."""


@dataclass
class Instance:
    """A workload built for one device and dtype, normalised from whatever its factory returned."""

    model: torch.nn.Module
    inputs: tuple[Any, ...]
    loss: Callable[[Any], torch.Tensor] | None = None
    tolerances: dict[str, float] = field(default_factory=dict)
    reference: Callable[..., Any] | None = None
    skip: dict[str, str] = field(default_factory=dict)


def resolve_factory(spec: CheckSpec) -> Callable[..., Any]:
    if not spec.factory:
        return BUILTIN[spec.workload]
    module_name, _, attr = spec.factory.partition(":")
    module = importlib.import_module(module_name)
    try:
        return getattr(module, attr)
    except AttributeError:
        raise AttributeError(f"module {module_name!r} has no attribute {attr!r} (factory {spec.factory!r})") from None


def build(factory: Callable[..., Any], device: str, dtype: torch.dtype, seed: int = 0) -> Instance:
    """Call the factory under a fixed seed, with device/dtype if it takes them, else move what it returns."""
    params = inspect.signature(factory).parameters
    kwargs = {k: v for k, v in (("device", device), ("dtype", dtype)) if k in params}
    torch.manual_seed(seed)
    made = factory(**kwargs)
    if isinstance(made, Mapping):
        unknown = set(made) - {"model", "inputs", "loss", "tolerances", "reference", "skip"}
        if unknown or "model" not in made or "inputs" not in made:
            raise TypeError(
                "a factory's mapping needs 'model' and 'inputs' and may have 'loss', 'tolerances', 'reference', "
                f"'skip'; got keys {sorted(made)}"
            )
        inst = Instance(
            model=made["model"],
            inputs=_as_tuple(made["inputs"]),
            loss=made.get("loss"),
            tolerances=dict(made.get("tolerances") or {}),
            reference=made.get("reference"),
            skip=dict(made.get("skip") or {}),
        )
    elif isinstance(made, (tuple, list)) and len(made) == 2:
        inst = Instance(model=made[0], inputs=_as_tuple(made[1]))
    else:
        raise TypeError(f"a factory must return (model, inputs) or a mapping with model and inputs, got {type(made).__name__}")
    if not callable(inst.model):
        raise TypeError(f"the factory's model is not callable: {type(inst.model).__name__}")
    if "device" not in kwargs or "dtype" not in kwargs:
        inst.model = _move(inst.model, device, None if "dtype" in kwargs else dtype)
        inst.inputs = tuple(_move(x, device, None if "dtype" in kwargs else dtype) for x in inst.inputs)
    return inst


def _as_tuple(inputs: Any) -> tuple[Any, ...]:
    return tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)


def _move(obj: Any, device: str, dtype: torch.dtype | None) -> Any:
    if isinstance(obj, torch.nn.Module):
        obj = obj.to(device)
        return obj.to(dtype) if dtype is not None else obj
    if isinstance(obj, torch.Tensor):
        moved = obj.to(device, dtype) if dtype is not None and obj.is_floating_point() else obj.to(device)
        return moved.detach().requires_grad_(obj.requires_grad) if moved.is_leaf or obj.requires_grad else moved
    return obj


def _copy_to(inst: Instance, target: Instance, dtype: torch.dtype) -> None:
    """Give `target` the weights and inputs of `inst` (cast to `dtype`), so both compute the same function."""
    if isinstance(inst.model, torch.nn.Module) and isinstance(target.model, torch.nn.Module):
        state = {
            k: (v.detach().to("cpu", dtype) if v.is_floating_point() else v.detach().cpu())
            for k, v in inst.model.state_dict().items()
        }
        target.model.load_state_dict(state)
    target.inputs = tuple(
        x.detach().to("cpu", dtype).requires_grad_(x.requires_grad)
        if isinstance(x, torch.Tensor) and x.is_floating_point()
        else x
        for x in inst.inputs
    )


def _forward_backward(inst: Instance, *, use_reference: bool = False, model: Any = None) -> dict[str, torch.Tensor]:
    """Outputs, and when the workload has a loss, gradients of parameters and inputs: forward and backward."""
    fn = inst.reference if use_reference and inst.reference is not None else (model or inst.model)
    if isinstance(inst.model, torch.nn.Module):
        inst.model.eval()
    wants_grad = inst.loss is not None
    with torch.set_grad_enabled(wants_grad):
        out = fn(*inst.inputs)
        named = {k: v.detach() for k, v in tensors.flatten(out).items()}
        if wants_grad:
            leaves = _grad_leaves(inst)
            loss = inst.loss(out)
            grads = torch.autograd.grad(loss, [t for _, t in leaves], allow_unused=True)
            for (name, _), g in zip(leaves, grads):
                if g is not None:
                    named[f"grad:{name}"] = g.detach()
    return named


def _grad_leaves(inst: Instance) -> list[tuple[str, torch.Tensor]]:
    leaves = []
    if isinstance(inst.model, torch.nn.Module):
        leaves += [(n, p) for n, p in inst.model.named_parameters() if p.requires_grad]
    leaves += [(f"input{i}", x) for i, x in enumerate(inst.inputs) if isinstance(x, torch.Tensor) and x.requires_grad]
    return leaves


def _golden(factory: Callable[..., Any], inst: Instance) -> dict[str, torch.Tensor]:
    gold = build(factory, "cpu", torch.float64)
    _copy_to(inst, gold, torch.float64)
    return _forward_backward(gold, use_reference=True)


def _tolerances(spec: CheckSpec, inst: Instance, dtype: torch.dtype) -> tuple[float, float]:
    rtol, atol = tensors.DEFAULT_TOLERANCES[dtype]
    rtol = inst.tolerances.get("rtol", rtol)
    atol = inst.tolerances.get("atol", atol)
    return float(spec.params.get("rtol") or rtol), float(spec.params.get("atol") or atol)


def synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()
    elif device == "mps":
        torch.mps.synchronize()


def run(spec: CheckSpec, cache: dict[tuple[str, str, str], Instance] | None = None) -> dict[str, Any]:
    """Run one check and return its metrics; raises Skip when the aspect does not apply.

    With `cache`, instances are reused across calls (the A/B latency rounds of `compare`).
    """
    dtype = DTYPES[spec.dtype]
    factory = resolve_factory(spec)
    if spec.aspect == "fsdp2":
        from torch_upgrade_check.worker import fsdp2

        return fsdp2.run(spec)
    key = (spec.workload, spec.dtype, spec.device)
    if cache is not None and key in cache:
        inst = cache[key]
    else:
        inst = build(factory, spec.device, dtype)
        if cache is not None:
            cache[key] = inst
    if spec.aspect in inst.skip:
        raise Skip(inst.skip[spec.aspect])
    aspect = ASPECTS[spec.aspect]
    return aspect(spec, factory, inst, dtype)


def numerics(spec: CheckSpec, factory: Callable[..., Any], inst: Instance, dtype: torch.dtype) -> dict[str, Any]:
    rtol, atol = _tolerances(spec, inst, dtype)
    result = _forward_backward(inst)
    metrics = tensors.compare(result, _golden(factory, inst), rtol=rtol, atol=atol, dtype=dtype)
    return {**metrics, "rtol": rtol, "atol": atol}


def cross_backend(spec: CheckSpec, factory: Callable[..., Any], inst: Instance, dtype: torch.dtype) -> dict[str, Any]:
    if spec.device == "cpu":
        raise Skip("cross-backend compares an accelerator with the CPU; the device under test is the CPU")
    rtol, atol = _tolerances(spec, inst, dtype)
    cpu = build(factory, "cpu", dtype)
    _copy_to(inst, cpu, dtype)
    metrics = tensors.compare(
        _forward_backward(inst), _golden(factory, inst), reference=_forward_backward(cpu), rtol=rtol, atol=atol
    )
    return {**metrics, "rtol": rtol, "atol": atol}


def compile_(spec: CheckSpec, factory: Callable[..., Any], inst: Instance, dtype: torch.dtype) -> dict[str, Any]:
    """torch.compile (Inductor) vs eager, forward only; the first call's time is reported as compile time."""
    rtol, atol = _tolerances(spec, inst, dtype)
    eager = _forward_only(inst, inst.model)
    compiled = torch.compile(inst.model)
    synchronize(spec.device)
    start = time.perf_counter()
    _forward_only(inst, compiled)
    synchronize(spec.device)
    compile_time = time.perf_counter() - start
    result = _forward_only(inst, compiled)
    gold_inst = build(factory, "cpu", torch.float64)
    _copy_to(inst, gold_inst, torch.float64)
    golden = _forward_only(gold_inst, gold_inst.reference or gold_inst.model)
    metrics = tensors.compare(result, golden, reference=eager, rtol=rtol, atol=atol)
    return {**metrics, "compile_time_s": compile_time, "rtol": rtol, "atol": atol}


def _forward_only(inst: Instance, fn: Callable[..., Any]) -> dict[str, torch.Tensor]:
    if isinstance(inst.model, torch.nn.Module):
        inst.model.eval()
    with torch.no_grad():
        return {k: v.detach() for k, v in tensors.flatten(fn(*inst.inputs)).items()}


def determinism(spec: CheckSpec, factory: Callable[..., Any], inst: Instance, dtype: torch.dtype) -> dict[str, Any]:
    """Two seeded training steps from scratch must be bitwise equal under deterministic algorithms."""
    if inst.loss is None:
        raise Skip("the workload has no loss, and determinism needs a training step: add 'loss' to the factory")
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        first = _train_step(factory, spec.device, dtype)
        second = _train_step(factory, spec.device, dtype)
    finally:
        torch.use_deterministic_algorithms(before)
    return tensors.bitwise_diff(first, second)


def _train_step(factory: Callable[..., Any], device: str, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    inst = build(factory, device, dtype)
    named: dict[str, torch.Tensor] = {}
    model = inst.model
    params = [p for p in model.parameters() if p.requires_grad] if isinstance(model, torch.nn.Module) else []
    if isinstance(model, torch.nn.Module):
        model.train()
    out = model(*inst.inputs)
    loss = inst.loss(out)
    loss.backward()
    named["loss"] = loss.detach()
    for name, leaf in _grad_leaves(inst):
        if leaf.grad is not None:
            named[f"grad:{name}"] = leaf.grad.detach().clone()
    if params:
        torch.optim.SGD(params, lr=0.01, momentum=0.9).step()
        named.update({f"param:{n}": p.detach().clone() for n, p in model.named_parameters()})
    synchronize(device)
    return named


def latency(spec: CheckSpec, factory: Callable[..., Any], inst: Instance, dtype: torch.dtype) -> dict[str, Any]:
    """Eager forward latency: warm-up, then samples of `inner` calls each, device synchronised around each."""
    if isinstance(inst.model, torch.nn.Module):
        inst.model.eval()
    budget_s = float(spec.params.get("latency_budget_s") or 1.0)
    min_samples, max_samples = 5, 30
    if spec.params.get("samples"):  # a fixed batch: one round of compare's interleaved A/B measurement
        min_samples = max_samples = int(spec.params["samples"])

    def call() -> None:
        with torch.no_grad():
            inst.model(*inst.inputs)

    for _ in range(3):
        call()
    synchronize(spec.device)
    start = time.perf_counter()
    call()
    synchronize(spec.device)
    once = max(time.perf_counter() - start, 1e-7)
    inner = max(1, int(0.005 / once))  # each sample lasts at least ~5 ms, above timer resolution
    samples: list[float] = []
    began = time.perf_counter()
    while len(samples) < max_samples and (len(samples) < min_samples or time.perf_counter() - began < budget_s):
        synchronize(spec.device)
        t0 = time.perf_counter()
        for _ in range(inner):
            call()
        synchronize(spec.device)
        samples.append((time.perf_counter() - t0) * 1000.0 / inner)
    return {"samples_ms": samples, "inner_loops": inner, "warmup": 4, "threads": torch.get_num_threads()}


def memory_(spec: CheckSpec, factory: Callable[..., Any], inst: Instance, dtype: torch.dtype) -> dict[str, Any]:
    """Peak memory of one forward (and backward, with a loss), measured with the backend's own API."""
    del factory, dtype
    with memory.PeakMemory(spec.device) as peak:
        _forward_backward(inst)
        synchronize(spec.device)
    return {"peak_bytes": peak.bytes, "memory_api": peak.api}


ASPECTS: dict[str, Callable[[CheckSpec, Callable[..., Any], Instance, torch.dtype], dict[str, Any]]] = {
    "numerics": numerics,
    "cross-backend": cross_backend,
    "compile": compile_,
    "cross-version": lambda spec, factory, inst, dtype: _crossversion().run(spec, factory, inst, dtype),
    "determinism": determinism,
    "latency": latency,
    "memory": memory_,
}


def _crossversion() -> Any:
    from torch_upgrade_check.worker import crossversion

    return crossversion


def add_python_path(paths: list[str]) -> None:
    for p in reversed(paths):
        if p not in sys.path:
            sys.path.insert(0, p)


__all__ = ["ASPECTS", "Skip", "build", "run"]
