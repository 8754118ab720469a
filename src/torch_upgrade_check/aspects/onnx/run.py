"""The onnx aspect: `torch.onnx.export` with the exporter the team calls, the file run in onnxruntime against eager.

Upgrades broke ONNX export two ways: an exporter that raised on a model the previous version exported, and a changed
default (2.9 made `dynamo=True` the default of `torch.onnx.export`, and calls written for the TorchScript-based exporter
failed: ray-project/ray#64410). The workload's `onnx:` says which exporter it calls: `dynamo` (`dynamo=True`),
`legacy` (`dynamo=False`, the TorchScript-based exporter, while the version has it) or `default` (no `dynamo=`
argument: whatever this version defaults to, read from `torch.onnx.export`'s own signature).

The model is exported on the check's device, and the file is run by onnxruntime's CPU execution provider (an ONNX
file does not depend on the torch that wrote it). Its outputs are judged against the fp64 golden with eager in the
same dtype as the reference (the compile rule). Modes, as the export aspect's: "save" (the baseline) keeps its
weights, inputs, eager outputs, whether it exported and its default exporter; "compare" (the candidate) computes the
baseline's function, exports it, and is judged against its own eager and the baseline's, the analysis saying when the
default exporter changed between the two.
"""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import io
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from torch_upgrade_check.aspects.export.run import against_eager
from torch_upgrade_check.model import CheckSpec
from torch_upgrade_check.worker import crossversion, first_line, tensors
from torch_upgrade_check.worker.instance import Instance, Skip, forward_only

EXPORTERS = ("dynamo", "legacy")
NEEDS = {"dynamo": ("onnx", "onnxscript", "onnxruntime"), "legacy": ("onnx", "onnxruntime")}
_COLOUR = re.compile(r"\x1b\[[0-9;]*m")
EXTRA = "pip install 'torch-upgrade-check[onnx]' in the environment under test (onnx, onnxscript, onnxruntime)"


def default_exporter() -> str:
    """What `torch.onnx.export` does without `dynamo=`, from its own signature (no `dynamo` argument: before 2.5)."""
    parameter = inspect.signature(torch.onnx.export).parameters.get("dynamo")
    return "dynamo" if parameter is not None and parameter.default is True else "legacy"


def run(spec: CheckSpec, factory: Callable[..., Any], inst: Instance, device: Any) -> dict[str, Any]:
    how = str(spec.params.get("onnx") or "default")
    default = default_exporter()
    exporter = default if how == "default" else how
    if exporter not in EXPORTERS:
        raise ValueError(f"onnx: {how!r} is none of dynamo, legacy, default")
    missing = [m for m in NEEDS[exporter] if not _importable(m)]
    if missing:
        raise Skip(f"onnx needs {', '.join(missing)}, not installed with this torch: {EXTRA}")
    if spec.dtype == "bfloat16":
        raise Skip("onnxruntime's Python API takes numpy arrays, and numpy has no bfloat16")
    if not isinstance(inst.model, torch.nn.Module):
        raise Skip(f"torch.onnx.export exports an nn.Module: the workload's model is a {type(inst.model).__name__}")
    mode = spec.params.get("mode") or "alone"
    metrics: dict[str, Any] = {"mode": mode, "how": how, "exporter": exporter, "default_exporter": default}
    baseline: dict[str, Any] = {}
    if mode == "compare":
        saved = _saved(spec)
        if not saved.exists():
            raise Skip("the baseline saved nothing for this check (it did not run there, or failed there)")
        baseline = torch.load(saved, map_location="cpu", weights_only=True)
        crossversion.load_into(inst, baseline, spec.device)
        metrics.update(baseline_torch=baseline["torch"], baseline_built=baseline["built"],
                       baseline_default_exporter=baseline["default_exporter"])
    inst.model.eval()
    args = tuple(x.detach() if isinstance(x, torch.Tensor) else x for x in inst.inputs)
    eager = forward_only(inst, inst.model)
    with tempfile.TemporaryDirectory(prefix="tuc-onnx-") as tmp:
        path = Path(tmp) / "model.onnx"
        error = _export(inst.model, args, path, how)
        if mode == "save":
            saved = _saved(spec)
            saved.parent.mkdir(parents=True, exist_ok=True)
            torch.save({"torch": str(torch.__version__), "built": not error, "default_exporter": default,
                        **crossversion.saved_weights_and_inputs(inst), "eager": {k: tensors.host(v) for k, v in eager.items()}},
                       saved)
        if error:
            return {**metrics, "built": False, "build_error": error}
        outputs, error = _onnxruntime(path, args, list(eager))
    metrics["onnxruntime"] = _version("onnxruntime")
    if error:
        return {**metrics, "built": True, "load_errors": {"onnxruntime": error}}
    results = {"onnxruntime": outputs}
    references = {"onnxruntime": eager}
    if baseline:
        results["onnxruntime vs baseline's eager"] = outputs
        references["onnxruntime vs baseline's eager"] = baseline["eager"]
    return {**metrics, "built": True, "load_errors": {}, **against_eager(spec, factory, inst, results, references)}


def _export(model: torch.nn.Module, args: tuple[Any, ...], path: Path, how: str) -> str:
    """Export to `path` as the team calls it; the first line of what raised, or "" when it exported."""
    kwargs = {} if how == "default" else {"dynamo": how == "dynamo"}
    call = "torch.onnx.export" + (f"(dynamo={how == 'dynamo'})" if kwargs else "")
    # the dynamo exporter prints its progress: kept off the worker's stdout
    with contextlib.redirect_stdout(io.StringIO()), torch.no_grad():
        try:
            torch.onnx.export(model, args, str(path), **kwargs)
        except Exception as e:
            return f"{call}: {_cause(e)}"[:400]
    return "" if path.exists() else f"{call} returned without writing the file"


def _cause(e: BaseException) -> str:
    """The error's first line and, where the exporter wrapped another (its step 1/3 wraps torch.export's), the
    innermost one's: the op or graph break it names. Terminal colours dropped."""
    root = e
    while root.__cause__ is not None:
        root = root.__cause__
    said = f"{type(e).__name__}: {first_line(e)}"
    if root is not e:
        said += f" (caused by {type(root).__name__}: {first_line(root)})"
    return _COLOUR.sub("", said)


def _onnxruntime(path: Path, args: tuple[Any, ...], names: list[str]) -> tuple[dict[str, torch.Tensor], str]:
    """The file's outputs in onnxruntime (CPU), named as eager's are, or why it did not load or run."""
    import onnxruntime

    stage = "onnxruntime.InferenceSession"
    try:
        session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        stage = "running the ONNX model in onnxruntime"
        arrays = [tensors.host(x).numpy() for x in args if isinstance(x, torch.Tensor)]
        wanted = [i.name for i in session.get_inputs()]
        if len(wanted) != len(arrays):
            return {}, f"{stage}: the model takes {len(wanted)} inputs ({', '.join(wanted)}), the workload gives {len(arrays)}"
        outputs = session.run(None, dict(zip(wanted, arrays)))
    except Exception as e:
        return {}, f"{stage}: {type(e).__name__}: {first_line(e)}"[:400]
    if len(outputs) != len(names):
        return {}, f"{stage}: it returned {len(outputs)} outputs where eager returns {len(names)}"
    return {name: torch.from_numpy(out) for name, out in zip(names, outputs)}, ""


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ValueError:  # sys.modules[module] is None: the import is blocked
        return False


def _version(module: str) -> str:
    with contextlib.suppress(Exception):
        return str(importlib.import_module(module).__version__)
    return "?"


def _saved(spec: CheckSpec) -> Path:
    base = crossversion.store_path(spec)
    return base.with_name(f"{base.stem}-onnx-io.pt")
