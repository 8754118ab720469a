"""The first aten op that changed: the baseline records each aten op's inputs and outputs under a
TorchDispatchMode; the candidate replays the baseline's recorded inputs of each op, in order, and names the
first op whose output leaves the tolerance around the baseline's.

Replaying the baseline's inputs (not the candidate's own) keeps upstream drift from cascading: every op is
judged on exactly what the baseline gave it, so the op named is the one whose kernel changed, not the first
one downstream of it that happens to cross a tolerance. Ops whose output is uninitialised memory (`empty*`)
or drawn from the random stream (tagged `nondeterministic_seeded`) are not recorded.

Bounded: the first MAX_OPS ops, and at most BYTE_BUDGET bytes of recorded tensors (inputs and outputs, on the
host); past either the recording stops and says so (`ops_truncated`). Its cost is one more forward and
backward on the baseline with every op's tensors copied to the host, and the file under the report folder.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_unflatten, treespec_dumps, treespec_loads

from torch_upgrade_check.worker import first_line, tensors
from torch_upgrade_check.worker.instance import Instance, forward_backward

MAX_OPS = 4000
BYTE_BUDGET = 64 * 2**20
UNINITIALISED = {"empty", "empty_like", "new_empty", "empty_strided", "new_empty_strided"}


def _replayable(func: Any) -> bool:
    name = getattr(func, "_schema", None) and func._schema.name.split("::")[-1]
    return bool(name) and name not in UNINITIALISED and torch.Tag.nondeterministic_seeded not in func.tags


def _encode(x: Any) -> Any:
    """A host copy of a tensor (its own storage: a view would save its base), a memory format by name (torch.save
    cannot pickle one), anything else as it is."""
    if isinstance(x, torch.Tensor):
        return tensors.host(x).clone()
    if isinstance(x, torch.memory_format):
        return {"memory_format": str(x).removeprefix("torch.")}
    return x


def _decode(x: Any, device: str) -> Any:
    if isinstance(x, torch.Tensor):
        return x.to(device)
    if isinstance(x, dict) and set(x) == {"memory_format"}:
        return getattr(torch, x["memory_format"])
    return x


def _nbytes(values: list[Any]) -> int:
    return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))


def record(inst: Instance, path: Path) -> dict[str, Any]:
    """Run the instance's forward and backward once more, recording its aten ops into `path`; what it cost."""
    started = time.perf_counter()
    records, state = _recorded(inst, keep_tensors=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"torch": str(torch.__version__), "ops": records, "seen": state["seen"],
                "truncated": state["truncated"]}, path)
    return {"ops_recorded": len(records), "ops_seen": state["seen"], "ops_bytes": state["bytes"],
            "ops_truncated": state["truncated"], "ops_record_s": round(time.perf_counter() - started, 4)}


def _recorded(inst: Instance, *, keep_tensors: bool) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The replayable aten ops of one forward and backward, in order, with the module that called each (and with
    `keep_tensors`, their inputs and outputs on the host, within MAX_OPS and BYTE_BUDGET)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    stack: list[str] = []
    records: list[dict[str, Any]] = []
    state = {"seen": 0, "bytes": 0, "truncated": False}

    class Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            state["seen"] += 1
            keep = not state["truncated"] and _replayable(func)
            if keep and keep_tensors:
                leaves, spec = tree_flatten((args, kwargs))
                inputs = [_encode(x) for x in leaves]  # before the op: an in-place op changes them
            out = func(*args, **kwargs)
            if keep and not keep_tensors:
                records.append({"op": str(func), "module": _where(stack)})
                state["truncated"] = len(records) >= MAX_OPS
            elif keep:
                outputs = [tensors.host(o).clone() if isinstance(o, torch.Tensor) else None for o in tree_flatten(out)[0]]
                size = _nbytes(inputs) + _nbytes(outputs)
                if len(records) >= MAX_OPS or state["bytes"] + size > BYTE_BUDGET:
                    state["truncated"] = True
                else:
                    records.append({"op": str(func), "module": _where(stack), "spec": treespec_dumps(spec),
                                    "inputs": inputs, "outputs": outputs})
                    state["bytes"] += size
            return out

    handles = _module_hooks(inst, stack)
    try:
        with Recorder():
            forward_backward(inst)
    finally:
        for h in handles:
            h.remove()
    return records, state


def first_call_changed(inst: Instance, path: Path) -> dict[str, Any] | None:
    """Where no op's kernel changed: the first place this torch's sequence of aten ops (which op, called from which
    module) leaves the baseline's, as a change above the kernels (a new decomposition, Python code around the ops)
    shows; None where the sequences agree as far as the baseline recorded."""
    theirs = torch.load(path, map_location="cpu", weights_only=True)["ops"]
    mine, _ = _recorded(inst, keep_tensors=False)
    for index, (a, b) in enumerate(zip(theirs, mine)):
        if (a["op"], a["module"]) != (b["op"], b["module"]):
            return {"index": index, "baseline": f"{a['op']} in {a['module']}", "candidate": f"{b['op']} in {b['module']}"}
    if len(mine) < len(theirs):
        return {"index": len(mine), "baseline": f"{theirs[len(mine)]['op']} in {theirs[len(mine)]['module']}",
                "candidate": "no more ops"}
    return None


def _module_hooks(inst: Instance, stack: list[str]) -> list[Any]:
    if not isinstance(inst.model, torch.nn.Module):
        return []
    handles = []
    for name, module in inst.model.named_modules():
        def push(_m: Any, _inp: Any, name: str = name or "(the model)") -> None:
            stack.append(name)

        def pop(_m: Any, _inp: Any, _out: Any) -> None:
            if stack:
                stack.pop()

        handles += [module.register_forward_pre_hook(push), module.register_forward_hook(pop)]
    return handles


def _where(stack: list[str]) -> str:
    """The module whose forward called the op; in the backward, the autograd node running it."""
    current = getattr(torch._C, "_current_autograd_node", None)  # torch 2.1 and later
    node = current() if current is not None else None
    if node is not None:
        return f"backward: {node.name()}"
    return stack[-1] if stack else "(outside the model: the loss)"


def _resolve(name: str) -> Any:
    """`aten.gelu.default` -> torch.ops.aten.gelu.default, or None where this torch has no such op."""
    try:
        namespace, op, overload = name.split(".")
        return getattr(getattr(getattr(torch.ops, namespace), op), overload)
    except (AttributeError, ValueError, RuntimeError):
        return None


def _describe(x: Any) -> str:
    return f"{str(x.dtype).removeprefix('torch.')}{list(x.shape)}" if isinstance(x, torch.Tensor) else repr(x)[:40]


def _outside(got: Any, want: torch.Tensor, tolerances: dict[str, tuple[float, float]]) -> tuple[bool, float]:
    """Whether `got` leaves the tolerance around the baseline's `want` (atol in units of want's RMS, as every
    closeness judgement here); and the largest absolute difference."""
    if not isinstance(got, torch.Tensor) or tuple(got.shape) != tuple(want.shape):
        return True, float("inf")
    got = tensors.host(got)
    if not want.is_floating_point() and not want.is_complex():
        return (not torch.equal(got, want)), float((got.double() - want.double()).abs().max()) if want.numel() else 0.0
    if not want.numel():
        return False, 0.0
    rtol, atol = tolerances.get(str(want.dtype).removeprefix("torch."), tensors.DEFAULT_TOLERANCES["float32"])
    g, w = got.double(), want.double()
    nan = torch.isnan(g) & ~torch.isnan(w)
    diff = torch.where(torch.isnan(g) & torch.isnan(w), torch.zeros_like(g), (g - w).abs())
    finite = torch.isfinite(w)
    scale = float(w[finite].pow(2).mean().sqrt()) if bool(finite.any()) else 1.0
    bad = bool(nan.any()) or bool((diff > atol * (scale or 1.0) + rtol * w.abs()).any())
    return bad, float(diff.nan_to_num(nan=float("inf")).max())


def first_changed(path: Path, device: str, tolerances: dict[str, tuple[float, float]],
                  repro_dir: Path, name: str) -> dict[str, Any]:
    """Replay the baseline's recorded ops on this torch; the first whose output leaves the tolerance, with a
    standalone repro of it saved under `repro_dir`, or how many were replayed and none changed."""
    saved = torch.load(path, map_location="cpu", weights_only=True)
    started, missing = time.perf_counter(), []
    for index, rec in enumerate(saved["ops"]):
        func = _resolve(rec["op"])
        if func is None:
            missing.append(rec["op"])
            continue
        args, kwargs = tree_unflatten([_decode(x, device) for x in rec["inputs"]], treespec_loads(rec["spec"]))
        found: dict[str, Any] | None = None
        try:
            with torch.no_grad():
                outputs = tree_flatten(func(*args, **kwargs))[0]
        except Exception as e:
            found = {"error": f"{type(e).__name__}: {first_line(e)}"[:300], "output": 0, "max_abs_err": float("inf")}
        else:
            for j, (got, want) in enumerate(zip(outputs, rec["outputs"])):
                if want is None:
                    continue
                bad, err = _outside(got, want, tolerances)
                if bad:
                    found = {"output": j, "max_abs_err": err}
                    break
        if found is not None:
            args, kwargs = tree_unflatten([_decode(x, "cpu") for x in rec["inputs"]], treespec_loads(rec["spec"]))
            return {"op": rec["op"], "module": rec["module"], "index": index, "of": len(saved["ops"]),
                    "inputs": [_describe(x) for x in tree_flatten((args, kwargs))[0] if isinstance(x, torch.Tensor)],
                    "outputs": [_describe(x) for x in rec["outputs"] if x is not None],
                    **found, **_repro(rec, args, kwargs, found["output"], device, repro_dir, name, saved["torch"]),
                    "replay_s": round(time.perf_counter() - started, 4)}
    return {"op": None, "replayed": len(saved["ops"]) - len(missing), "of": len(saved["ops"]),
            "truncated": saved["truncated"], "missing_ops": sorted(set(missing))[:5],
            "replay_s": round(time.perf_counter() - started, 4)}


def _repro(rec: dict[str, Any], args: Any, kwargs: dict[str, Any], output: int, device: str, folder: Path,
           name: str, baseline_torch: str) -> dict[str, Any]:
    """The op's baseline inputs and output in `folder/name.pt`, and a one-line command that runs it alone (a
    memory_format argument is dropped from the file: torch.save cannot store one, and it changes strides only)."""
    file = folder / f"{name}.pt"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        kwargs = {k: v for k, v in kwargs.items() if not isinstance(v, torch.memory_format)}
        torch.save({"op": rec["op"], "args": args, "kwargs": kwargs, "baseline_output": rec["outputs"][output],
                    "baseline_torch": baseline_torch}, file)
    except Exception as e:  # an argument torch.save cannot store: the op is named, without its repro
        return {"repro_error": f"{type(e).__name__}: {first_line(e)}"[:200]}
    relative = f"{folder.name}/{file.name}"
    pick = f"[{output}]" if len(rec["outputs"]) > 1 else ""
    load = f"torch.load('{relative}'" + (f", map_location='{device}')" if device != "cpu" else ")")
    line = (f"python -c \"import torch; d = {load}; out = torch.ops.{rec['op']}(*d['args'], **d['kwargs']){pick}; "
            f"print('max abs diff from the baseline:', (out.double().cpu() - d['baseline_output'].double()).abs().max())\"")
    return {"repro_file": relative, "repro": line}
