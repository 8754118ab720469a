"""A workload built for one device and dtype, and what every aspect does with it: forward, backward, golden.

Shared by the aspects (`checks`, and each aspect folder's run.py: aspects/<folder>/run.py) and cross-version
numerics (`crossversion`), so none of them imports another.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from torch_upgrade_check.model import CheckSpec
from torch_upgrade_check.worker import tensors
from torch_upgrade_check.worker.workloads import BUILTIN

FACTORY_KEYS = ("model", "inputs", "loss", "tolerances", "reference", "skip", "checkpoint_extra", "dynamic_shapes",
                "dynamic_inputs", "dataset", "collate")


class Skip(Exception):
    """Raised by an aspect that does not apply here; the message is the reason shown to users."""


@dataclass
class Instance:
    """A workload built for one device and dtype, normalised from whatever its factory returned.

    `skip` maps an aspect (or "gradients": forward only) to the reason it cannot run here.
    """

    model: Any
    inputs: tuple[Any, ...]
    loss: Callable[[Any], torch.Tensor] | None = None
    tolerances: dict[str, float] = field(default_factory=dict)
    reference: Callable[..., Any] | None = None
    skip: dict[str, str] = field(default_factory=dict)
    checkpoint_extra: Any = None  # an object a training job keeps in its checkpoint (a config): saved and loaded
    # torch.export's dynamic_shapes for the inputs (export, aoti), and inputs of other sizes the programs must run
    dynamic_shapes: Any = None
    dynamic_inputs: tuple[Any, ...] | None = None  # the first set of other sizes (export and aoti run it)
    # every set of other sizes the factory gave (`dynamic_inputs`: one set, or a list of sets): compile's size sweep
    dynamic_sweep: tuple[tuple[Any, ...], ...] = ()
    # what the training job loads through a DataLoader (the dataloader aspect): a map-style Dataset and its collate_fn
    dataset: Any = None
    collate: Callable[[list[Any]], Any] | None = None
    # the device's allocated bytes just before it was built, alone there (memory's run.py: its zero); None: not read
    allocated_before: int | None = None
    # what checks that run it compiled keep for their later rounds (compiled-latency: the compiled model), by check
    compiled: dict[str, Any] = field(default_factory=dict)


def require_training(inst: Instance, aspect: str) -> None:
    """Skip `aspect`, which trains the model with an optimizer, where the workload cannot be trained here."""
    if inst.loss is None:
        raise Skip(inst.skip.get("gradients")
                   or f"{aspect} takes training steps, and the workload has no loss: add 'loss' to the factory")
    if not isinstance(inst.model, torch.nn.Module) or not any(p.requires_grad for p in inst.model.parameters()):
        raise Skip(f"{aspect} trains a model's parameters with an optimizer: the workload has no nn.Module with "
                   f"trainable parameters")


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
        unknown = set(made) - set(FACTORY_KEYS)
        if unknown or "model" not in made or "inputs" not in made:
            raise TypeError(f"a factory's mapping needs 'model' and 'inputs' and may have "
                            f"{', '.join(repr(k) for k in FACTORY_KEYS[2:])}; got keys {sorted(made)}")
        inst = Instance(model=made["model"], inputs=_as_tuple(made["inputs"]), loss=made.get("loss"),
                        tolerances=dict(made.get("tolerances") or {}), reference=made.get("reference"),
                        skip=dict(made.get("skip") or {}), checkpoint_extra=made.get("checkpoint_extra"),
                        dynamic_shapes=made.get("dynamic_shapes"),
                        dynamic_sweep=_input_sets(made["dynamic_inputs"]) if "dynamic_inputs" in made else (),
                        dataset=made.get("dataset"), collate=made.get("collate"))
    elif isinstance(made, (tuple, list)) and len(made) == 2:
        inst = Instance(model=made[0], inputs=_as_tuple(made[1]))
    else:
        raise TypeError(f"a factory must return (model, inputs) or a mapping with model and inputs, got {type(made).__name__}")
    if not callable(inst.model):
        raise TypeError(f"the factory's model is not callable: {type(inst.model).__name__}")
    if "device" not in kwargs or "dtype" not in kwargs:
        inst.model = _move(inst.model, device, None if "dtype" in kwargs else dtype)
        inst.inputs = tuple(_move(x, device, None if "dtype" in kwargs else dtype) for x in inst.inputs)
        inst.dynamic_sweep = tuple(tuple(_move(x, device, None if "dtype" in kwargs else dtype) for x in other)
                                   for other in inst.dynamic_sweep)
    inst.dynamic_inputs = inst.dynamic_sweep[0] if inst.dynamic_sweep else None
    if "gradients" in inst.skip:
        inst.loss = None
    return inst


def _input_sets(given: Any) -> tuple[tuple[Any, ...], ...]:
    """A factory's `dynamic_inputs`: one set of inputs (a tensor, or a tuple or list of them), or a list of such sets
    (every item itself a tuple or list): a sweep of sizes."""
    if isinstance(given, (tuple, list)) and given and all(isinstance(x, (tuple, list)) for x in given):
        return tuple(_as_tuple(x) for x in given)
    return (_as_tuple(given),)


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


def copy_to(inst: Instance, target: Instance, dtype: torch.dtype) -> None:
    """Give `target` the weights and inputs of `inst` (floating ones cast to `dtype` on the host), so both compute the
    same function. Every tensor input is copied, integer and boolean ones as they are: token ids `target`'s own build
    drew are other ids wherever the generator moved on differently before them (weights drawn in another dtype, or
    on another device's generator), and a golden of other ids judges nothing. `target` keeps its own requires_grad:
    it asks for gradients only where its device has them."""
    if isinstance(inst.model, torch.nn.Module) and isinstance(target.model, torch.nn.Module):
        state = {k: tensors.host(v, dtype if v.is_floating_point() else None) for k, v in inst.model.state_dict().items()}
        target.model.load_state_dict(state)
    copied = []
    for mine, theirs in zip(inst.inputs, target.inputs):
        if isinstance(mine, torch.Tensor) and isinstance(theirs, torch.Tensor):
            value = tensors.host(mine, dtype if mine.is_floating_point() else None).to(theirs.device)
            copied.append(value.requires_grad_(theirs.requires_grad) if value.is_floating_point() else value)
        else:
            copied.append(theirs)
    target.inputs = tuple(copied)


def forward_backward(inst: Instance, *, use_reference: bool = False) -> dict[str, torch.Tensor]:
    """Outputs, and when the workload has a loss, gradients of parameters and inputs: forward and backward."""
    fn = inst.reference if use_reference and inst.reference is not None else inst.model
    if isinstance(inst.model, torch.nn.Module):
        inst.model.eval()
    leaves = grad_leaves(inst) if inst.loss is not None else []
    with torch.set_grad_enabled(bool(leaves)):
        out = fn(*inst.inputs)
        named = {k: v.detach() for k, v in tensors.flatten(out).items()}
        if leaves:
            grads = torch.autograd.grad(inst.loss(out), [t for _, t in leaves], allow_unused=True)
            named.update({f"grad:{name}": g.detach() for (name, _), g in zip(leaves, grads) if g is not None})
    return named


def grad_leaves(inst: Instance) -> list[tuple[str, torch.Tensor]]:
    leaves = []
    if isinstance(inst.model, torch.nn.Module):
        leaves += [(n, p) for n, p in inst.model.named_parameters() if p.requires_grad]
    leaves += [(f"input{i}", x) for i, x in enumerate(inst.inputs) if isinstance(x, torch.Tensor) and x.requires_grad]
    return leaves


def golden(factory: Callable[..., Any], inst: Instance,
           within: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext) -> dict[str, torch.Tensor]:
    """The fp64 CPU golden of exactly what `inst` computes: its weights and inputs, its outputs and gradients.

    The golden takes the instance's loss and input requires_grad (the CPU build of a workload may have
    dropped them where the CPU lacks a backward, as FlexAttention's does), and the workload's
    `reference` when it has one. `within` wraps the forward and backward (worker.rounding's simulated rounding:
    the model's own rounding error).
    """
    gold = build(factory, "cpu", torch.float64)
    copy_to(inst, gold, torch.float64)
    if inst.loss is not None:
        gold.loss = inst.loss
        gold.inputs = tuple(g.detach().requires_grad_(m.requires_grad) if isinstance(g, torch.Tensor)
                            and isinstance(m, torch.Tensor) and g.is_floating_point() else g
                            for g, m in zip(gold.inputs, inst.inputs))
    with within():
        return forward_backward(gold, use_reference=True)


def forward_golden(factory: Callable[..., Any], inst: Instance,
                   others: tuple[tuple[Any, ...], ...] = ()) -> list[dict[str, torch.Tensor]]:
    """The fp64 CPU forward outputs of `inst`'s function (its weights, its reference where it has one): on its inputs,
    then on each set of `others` (inputs of other sizes), in that order."""
    gold = build(factory, "cpu", torch.float64)
    copy_to(inst, gold, torch.float64)
    fn = gold.reference or gold.model
    found = [forward_only(gold, fn)]
    for other in others:
        wide = tuple(tensors.host(x, torch.float64 if x.is_floating_point() else None) if isinstance(x, torch.Tensor)
                     else x for x in other)
        found.append(forward_only(replace(gold, inputs=wide), fn))
    return found


def tolerances(spec: CheckSpec, inst: Instance) -> tuple[float, float]:
    rtol, atol = tensors.DEFAULT_TOLERANCES[spec.dtype]
    rtol = inst.tolerances.get("rtol", rtol)
    atol = inst.tolerances.get("atol", atol)
    given = {k: spec.params.get(k) for k in ("rtol", "atol")}
    return (float(given["rtol"]) if given["rtol"] is not None else float(rtol),
            float(given["atol"]) if given["atol"] is not None else float(atol))


def not_checked(inst: Instance) -> dict[str, str]:
    return {"gradients": inst.skip["gradients"]} if "gradients" in inst.skip else {}


def forward_only(inst: Instance, fn: Callable[..., Any]) -> dict[str, torch.Tensor]:
    if isinstance(inst.model, torch.nn.Module):
        inst.model.eval()
    with torch.no_grad():
        return {k: v.detach() for k, v in tensors.flatten(fn(*inst.inputs)).items()}


def add_python_path(paths: list[str]) -> None:
    for p in reversed(paths):
        if p not in sys.path:
            sys.path.insert(0, p)
