"""The team's own artifacts (config `artifacts:`): each file loaded with its loader's default arguments and run.

A team ships files, not only models: checkpoints, `.pt2` programs, AOTInductor packages, TorchScript and ONNX
files. An upgrade that changes a loader's default (2.6's `torch.load(weights_only=True)`) or what it reads breaks
them without touching a line of the team's code. Per kind, with default arguments only:

- checkpoint: `torch.load(file, map_location="cpu")` (this torch's `weights_only` default; onto the CPU, as the
  runner may lack the device it was saved from, and as the checkpoint aspect loads); with a `factory`, the
  state_dict it holds (the whole object, or its `model`, `state_dict` or `model_state_dict` entry) loaded into the
  factory's model, which runs on the factory's inputs; without one, the tensors the file holds are its outputs;
- export: `torch.export.load(file).module()`; aoti: `torch._inductor.aoti_load_package(file)`; jit:
  `torch.jit.load(file)`; each run on the inputs (`inputs:` returns them, or the `factory`'s);
- onnx: `onnxruntime.InferenceSession(file)` run on the inputs (onnxruntime, not torch, reads it: it stands for
  the environment's onnxruntime, which a stack upgrade may move with torch).

Alone (`run`), the file must load and run, and its outputs be finite. "save" (the baseline) keeps its outputs;
"compare" (the candidate) must reproduce them within the check's tolerances (float32's by default, torch.testing's).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from torch_upgrade_check.model import CheckSpec
from torch_upgrade_check.worker import crossversion, first_line, tensors, torchload
from torch_upgrade_check.worker.instance import Instance, Skip, build

STATE_KEYS = ("model", "state_dict", "model_state_dict")


def run(spec: CheckSpec, device: str) -> dict[str, Any]:
    kind, file = str(spec.params["kind"]), Path(spec.params["file"])
    mode = spec.params.get("mode") or "alone"
    metrics: dict[str, Any] = {"mode": mode, "kind": kind, "file": file.name}
    baseline: dict[str, Any] = {}
    saved = crossversion.store_path(spec).with_suffix(".shipped.pt") if mode != "alone" else None
    if mode == "compare":
        assert saved is not None
        if not saved.exists():
            raise Skip("the baseline saved nothing for this check (it did not run there, or failed there)")
        baseline = torch.load(saved, map_location="cpu", weights_only=True)
        metrics.update(baseline_torch=baseline["torch"], baseline_built=baseline["loaded"])
    inst = _instance(spec, device, kind)
    if inst is not None and baseline.get("inputs") is not None:  # the baseline's inputs, not the candidate's own
        inst = replace(inst, inputs=tuple(x.to(device) for x in baseline["inputs"]))
    outputs, error = _load_and_run(kind, file, inst, device)
    if mode == "save":
        assert saved is not None
        saved.parent.mkdir(parents=True, exist_ok=True)
        kept = None  # inputs that are all tensors are kept, so the candidate runs exactly these (an unseeded or
        if inst is not None and all(isinstance(x, torch.Tensor) for x in inst.inputs):  # version-dependent inputs())
            kept = [tensors.host(x) for x in inst.inputs]
        torch.save({"torch": str(torch.__version__), "loaded": not error, "inputs": kept,
                    "outputs": {k: tensors.host(v) for k, v in outputs.items()}}, saved)
    if error:
        return {**metrics, "built": False, "build_error": error}
    metrics.update(built=True, tensors=len(outputs),
                   nonfinite=sorted(k for k, v in outputs.items() if v.is_floating_point() and not torch.isfinite(v).all()))
    if not baseline.get("loaded"):
        return metrics
    rtol, atol = (float(spec.params.get(k, d)) for k, d in (("rtol", 1.3e-6), ("atol", 1e-5)))
    try:
        compared = tensors.compare(outputs, baseline["outputs"], rtol=rtol, atol=atol)
    except ValueError as e:  # a shape that differs from the baseline's
        compared = {"per_tensor": [], "uncompared": [str(e)]}
    return {**metrics, "rtol": rtol, "atol": atol, **compared}


def _instance(spec: CheckSpec, device: str, kind: str) -> Instance | None:
    """The factory's model and inputs, or the inputs alone from `inputs:`; None for a checkpoint without a factory."""
    if spec.factory:
        module, _, name = spec.factory.partition(":")
        return build(getattr(importlib.import_module(module), name), device, torch.float32)
    if spec.params.get("inputs"):
        module, _, name = str(spec.params["inputs"]).partition(":")
        inputs = getattr(importlib.import_module(module), name)()
        inputs = inputs if isinstance(inputs, tuple) else (inputs,)
        return Instance(model=None, inputs=tuple(x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs))
    if kind != "checkpoint":
        raise Skip(f"a {kind} file runs on inputs, and the artifact names neither 'inputs' nor 'factory'")
    return None


def _load_and_run(kind: str, file: Path, inst: Instance | None, device: str) -> tuple[dict[str, torch.Tensor], str]:
    """The file's outputs, or the step that raised and torch's first line."""
    call = {"checkpoint": "torch.load", "export": "torch.export.load", "aoti": "torch._inductor.aoti_load_package",
            "jit": "torch.jit.load", "onnx": "onnxruntime.InferenceSession"}[kind]
    if kind == "checkpoint":
        loaded, status = torchload.load(file)
        if not status["loaded"]:
            fix = f"; {status['fix']}" if status.get("fix") else ""
            return {}, f"torch.load: {status['load_error']}{fix}"
    logged: list[BaseException] = []
    caught = _Caught(logged)
    logging.getLogger("torch.export").addHandler(caught)
    try:
        loaded = loaded if kind == "checkpoint" else _load(kind, file)
        call = "running the loaded file"
        with torch.no_grad():
            if kind == "checkpoint":
                return _checkpoint_outputs(loaded, inst), ""
            assert inst is not None
            if kind == "onnx":
                arrays = [tensors.host(x).numpy() for x in inst.inputs if isinstance(x, torch.Tensor)]
                names = [i.name for i in loaded.get_inputs()]
                return {f"output[{i}]": torch.from_numpy(o) for i, o in enumerate(loaded.run(None, dict(zip(names, arrays))))}, ""
            return tensors.flatten(loaded(*inst.inputs)), ""
    except Exception as e:
        said = f"{type(e).__name__}: {first_line(e)}"
        if logged:  # torch.export.load logs the deserializer's error and raises a generic one
            said = f"{type(logged[-1]).__name__}: {first_line(logged[-1])}; raised as {said}"
        return {}, f"{call}: {said}"[:400]
    finally:
        logging.getLogger("torch.export").removeHandler(caught)


def _load(kind: str, file: Path) -> Any:
    if kind == "export":
        return torch.export.load(file).module()
    if kind == "jit":
        return torch.jit.load(str(file))
    if kind == "aoti":
        import torch._inductor as inductor  # `import torch._inductor` would make torch local to this function

        return inductor.aoti_load_package(str(file))
    import onnxruntime

    return onnxruntime.InferenceSession(str(file), providers=["CPUExecutionProvider"])


class _Caught(logging.Handler):
    def __init__(self, into: list[BaseException]) -> None:
        super().__init__()
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info and record.exc_info[1] is not None:
            self.into.append(record.exc_info[1])


def _checkpoint_outputs(loaded: Any, inst: Instance | None) -> dict[str, torch.Tensor]:
    if inst is None or not isinstance(inst.model, torch.nn.Module):
        return tensors.flatten(loaded, "loaded")
    state = next((loaded[k] for k in STATE_KEYS if isinstance(loaded, Mapping) and isinstance(loaded.get(k), Mapping)),
                 loaded)
    inst.model.load_state_dict(state)
    inst.model.eval()
    return tensors.flatten(inst.model(*inst.inputs))

