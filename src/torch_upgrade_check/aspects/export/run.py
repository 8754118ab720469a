"""Deployment artifacts: the workload as a team ships it, built, saved, loaded in a fresh process and run.

Upgrades broke artifacts more often than eager models: a program one version saved that the next would not
load, a model that exported (or scripted) on one version and raised on the next. Three aspects, one flow:

- `export`: `torch.export.export(model, inputs)` (with the factory's `dynamic_shapes` where it returns them; its
  `dynamic_inputs`, inputs of other sizes, are then run too, in this process and the fresh one), `torch.export.save`,
  and `torch.export.load(...).module()` in a fresh process;
- `jit`: `torch.jit.script` or `torch.jit.trace` (the workload's `jit:`; the built-ins trace), `torch.jit.save`,
  and `torch.jit.load` in a fresh process;
- `aoti` (opt-in: a compile takes a minute): the exported program compiled and packaged by
  `torch._inductor.aoti_compile_and_package`, loaded by `torch._inductor.aoti_load_package` in this process and in
  a fresh one. In `compare` the candidate builds its own package from the baseline's weights and inputs; it does
  not load the baseline's package: we found no promise in torch's documentation that a package loads in another
  version (a package holds a shared library built against the torch that compiled it), so that is not judged.

The program's outputs in this process and the reloaded program's outputs in the fresh one are judged against
the fp64 golden with eager in the same dtype as the reference (the compile rule). Modes, as the checkpoint
aspect's: alone (`run`, and the baseline in `compare`); "save" (the baseline) also keeps its program, weights,
inputs and eager outputs for the candidate; "compare" (the candidate) computes the baseline's function (its
weights and inputs), builds its own program, and loads and runs the program the baseline saved, judged
against the baseline's eager outputs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from torch_upgrade_check.model import CheckSpec
from torch_upgrade_check.worker import crossversion, first_line, tensors
from torch_upgrade_check.worker.instance import Instance, Skip, forward_golden, forward_only, tolerances

FRESH_PROCESS_TIMEOUT_S = 300.0
SUFFIX = {"export": ".pt2", "jit": ".pt", "aoti": ".pt2"}
CROSS_VERSION_LOAD = ("export", "jit")  # the kinds whose saved file the candidate loads in compare
OTHER = ", dynamic_inputs"  # the name's end of a program's run on the workload's inputs of other sizes

# A fresh interpreter (the worker's own), started at the first artifact check and kept for the worker's others, which
# never builds a program: per request line (JSON) it loads each program, runs it on the saved inputs, saves what it
# returned or why it could not, and answers one line. Self-contained: a saved program needs neither this package nor
# the user's code. One process for all of a worker's checks, as importing torch and torch.export costs seconds.
_LOADER = r"""
import json
import logging
import sys
import torch


class Caught(logging.Handler):  # torch.export.load logs the deserializer's error and raises a generic one
    def emit(self, record):
        if record.exc_info and record.exc_info[1] is not None:
            logged.append(record.exc_info[1])


def line(e):
    first = next((x.strip() for x in str(e).splitlines() if x.strip()), "")
    return f"{type(e).__name__}: {first}"


logged = []
logging.getLogger("torch.export").addHandler(Caught())
for request in sys.stdin:
    r = json.loads(request)
    kind, device = r["kind"], r["device"]
    args = tuple(x.to(device) if isinstance(x, torch.Tensor) else x for x in torch.load(r["inputs"], weights_only=True))
    results, errors = {}, {}
    for i, path in enumerate(r["programs"]):
        stage = {"export": "torch.export.load", "jit": "torch.jit.load", "aoti": "torch._inductor.aoti_load_package"}[kind]
        logged.clear()
        try:
            if kind == "export":
                program = torch.export.load(path).module()
            elif kind == "jit":
                program = torch.jit.load(path, map_location=device)
            else:
                import torch._inductor

                program = torch._inductor.aoti_load_package(path)
            stage = "running the loaded program"
            with torch.no_grad():
                results[str(i)] = program(*args)
        except Exception as e:
            cause = f"{line(logged[-1])}; raised as {line(e)}" if logged else line(e)
            errors[str(i)] = f"{stage}: {cause}"[:400]
    torch.save({"results": results, "errors": errors}, r["out"])
    print("done", flush=True)
"""
_loader: list[tuple[subprocess.Popen[str], Any]] = []  # the worker's one loader process and its stderr file


def run(spec: CheckSpec, factory: Callable[..., Any], inst: Instance, device: Any) -> dict[str, Any]:
    kind, mode = spec.aspect, spec.params.get("mode") or "alone"
    how = _how(spec)
    if kind == "aoti" and (missing := _no_cxx()):
        raise Skip(f"no C++ compiler on the runner (AOTInductor compiles the program to C++): {missing}; install g++ "
                   f"or set CXX to a C++ compiler")
    if not isinstance(inst.model, torch.nn.Module):
        raise Skip(f"{kind} builds a deployment artifact of an nn.Module: the workload's model is a "
                   f"{type(inst.model).__name__}")
    metrics: dict[str, Any] = {"mode": mode, "how": how}
    baseline: dict[str, Any] = {}
    if mode == "compare":
        if not _path(spec, "io").exists():
            raise Skip("the baseline saved nothing for this check (it did not run there, or failed there)")
        baseline = torch.load(_path(spec, "io"), map_location="cpu", weights_only=True)
        crossversion.load_into(inst, baseline, spec.device)
        metrics.update(baseline_torch=baseline["torch"], baseline_built=baseline["built"])
    inst.model.eval()
    args = tuple(x.detach() if isinstance(x, torch.Tensor) else x for x in inst.inputs)
    eager = forward_only(inst, inst.model)
    program, error = _build(kind, how, inst.model, args, inst.dynamic_shapes)
    if mode == "save":
        _path(spec, "io").parent.mkdir(parents=True, exist_ok=True)
        torch.save({"torch": str(torch.__version__), "built": program is not None,
                    **crossversion.saved_weights_and_inputs(inst), "eager": {k: tensors.host(v) for k, v in eager.items()}},
                   _path(spec, "io"))
    if program is None:
        return {**metrics, "built": False, "build_error": error}
    with tempfile.TemporaryDirectory(prefix=f"tuc-{kind}-") as tmp:
        own = _path(spec, "program") if mode == "save" else Path(tmp) / f"program{SUFFIX[kind]}"
        own.parent.mkdir(parents=True, exist_ok=True)
        try:
            _save(kind, program, own)
        except Exception as e:
            call = {"export": "torch.export.save", "jit": "torch.jit.save", "aoti": "aoti_compile_and_package"}[kind]
            return {**metrics, "built": True, "save_error": f"{call}: {type(e).__name__}: {first_line(e)}"[:400]}
        programs = {"reloaded": own}
        if kind in CROSS_VERSION_LOAD and baseline.get("built") and _path(spec, "program").exists():
            programs["baseline's program"] = _path(spec, "program")
        runnable = _runnable(kind, program, own)
        with torch.no_grad():
            results = {"in-process": tensors.flatten(runnable(*args))}
        fresh, errors = _in_a_fresh_process(kind, spec.device, programs, args, Path(tmp))
        other = _other_shapes(kind, spec.device, inst, runnable, own, Path(tmp), results, errors)
    results.update(fresh)
    references = {name: (baseline["eager"] if name == "baseline's program" else eager) for name in results}
    if other:
        metrics["dynamic_shapes"] = True
        references.update(dict.fromkeys((n for n in results if n.endswith(OTHER)), forward_only(replace(inst, inputs=other),
                                                                                                inst.model)))
    return {**metrics, "built": True, "load_errors": errors,
            **against_eager(spec, factory, inst, results, references, other)}


def _other_shapes(kind: str, device: str, inst: Instance, runnable: Callable[..., Any], own: Path, tmp: Path,
                  results: dict[str, Any], errors: dict[str, str]) -> tuple[Any, ...]:
    """With the workload's dynamic_shapes and dynamic_inputs (export, aoti): the program run on the inputs of other
    sizes in this process and in the fresh one (a program that specialised a declared dynamic dim raises there); its
    outputs and errors added under names ending OTHER. The other inputs, or () where there are none."""
    if kind == "jit" or inst.dynamic_shapes is None or inst.dynamic_inputs is None:
        return ()
    other = tuple(x.detach() if isinstance(x, torch.Tensor) else x for x in inst.dynamic_inputs)
    try:
        with torch.no_grad():
            results["in-process" + OTHER] = tensors.flatten(runnable(*other))
    except Exception as e:
        errors["in-process" + OTHER] = f"running the program on dynamic_inputs: {type(e).__name__}: {first_line(e)}"[:400]
    (tmp / "other").mkdir()
    fresh, failed = _in_a_fresh_process(kind, device, {"reloaded" + OTHER: own}, other, tmp / "other")
    results.update(fresh)
    errors.update(failed)
    return other


def against_eager(spec: CheckSpec, factory: Callable[..., Any], inst: Instance, results: dict[str, dict[str, Any]],
                  references: dict[str, dict[str, Any]], other: tuple[Any, ...] = ()) -> dict[str, Any]:
    """Each program's outputs (by program name) against the fp64 golden, with its eager outputs as the reference (the
    compile rule): the metrics aspects.export.judge judges. Programs named ...OTHER ran on `other` inputs."""
    result = {f"{name}:{k}": v for name, outs in results.items() for k, v in outs.items()}
    reference = {f"{name}:{k}": v for name, outs in references.items() for k, v in outs.items()}
    gold, *gold_others = forward_golden(factory, inst, (other,) if other else ())
    golden = {f"{name}:{k}": v for name in results for k, v in (gold_others[0] if name.endswith(OTHER) else gold).items()}
    rtol, atol = tolerances(spec, inst)
    compared = tensors.compare(result, golden, reference=reference, rtol=rtol, atol=atol, dtype=spec.dtype)
    return {"programs": sorted(results), "rtol": rtol, "atol": atol, **compared}


def _how(spec: CheckSpec) -> str:
    if spec.aspect != "jit":
        return spec.aspect
    how = spec.params.get("jit") or "trace"  # the built-ins trace
    if how not in ("script", "trace"):
        raise ValueError(f"jit: {how!r} is neither 'script' nor 'trace'")
    return str(how)


def _build(kind: str, how: str, model: torch.nn.Module, args: tuple[Any, ...], dynamic: Any) -> tuple[Any, str]:
    """The artifact, or None and the first line of what raised (the unsupported op or graph break it names)."""
    try:
        if kind in ("export", "aoti"):  # aoti: compiled and packaged when saved
            return torch.export.export(model, args, **({"dynamic_shapes": dynamic} if dynamic is not None else {})), ""
        if how == "script":
            return torch.jit.script(model), ""
        with torch.no_grad():
            return torch.jit.trace(model, args), ""
    except Exception as e:
        call = f"torch.jit.{how}" if kind == "jit" else "torch.export.export"
        return None, f"{call}: {type(e).__name__}: {first_line(e)}"[:400]


def _save(kind: str, program: Any, path: Path) -> None:
    if kind == "export":
        torch.export.save(program, path)
    elif kind == "aoti":
        import torch._inductor as inductor  # `import torch._inductor` would make torch local to this function

        inductor.aoti_compile_and_package(program, package_path=str(path))
    else:
        torch.jit.save(program, str(path))


def _runnable(kind: str, program: Any, saved: Path) -> Callable[..., Any]:
    """What this process runs: the exported program's module, the TorchScript module, or the AOTI package loaded."""
    if kind == "export":
        return program.module()
    if kind == "aoti":
        import torch._inductor as inductor

        return inductor.aoti_load_package(str(saved))
    return program  # type: ignore[no-any-return]


def _no_cxx() -> str:
    """Why Inductor would find no C++ compiler, asked of torch's own search (CXX, else g++; clang++ on macOS), or ""
    where it finds one. A torch without that getter: CXX or g++/c++/clang++ on PATH."""
    try:
        from torch._inductor import cpp_builder, exc
    except ImportError:
        found = any(shutil.which(n) for n in (os.environ.get("CXX", ""), "g++", "c++", "clang++") if n)
        return "" if found else "none of CXX, g++, c++, clang++ found on PATH"
    try:
        cpp_builder.get_cpp_compiler()
    except exc.InvalidCxxCompiler as e:
        return first_line(e)
    return ""


def _in_a_fresh_process(kind: str, device: str, programs: dict[str, Path], args: tuple[Any, ...],
                        tmp: Path) -> tuple[dict[str, dict[str, torch.Tensor]], dict[str, str]]:
    """Each program loaded and run in the loader process (one that never built a program): its outputs by program
    name, and what failed."""
    inputs, out = tmp / "inputs.pt", tmp / "outputs.pt"
    torch.save([tensors.host(x) if isinstance(x, torch.Tensor) else x for x in args], inputs)
    names = list(programs)
    if not _loader or _loader[0][0].poll() is not None:
        stderr = tempfile.TemporaryFile("w+")  # a file, not a pipe: warnings never fill it and block the loader
        _loader[:] = [(subprocess.Popen([sys.executable, "-c", _LOADER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=stderr, text=True), stderr)]
    proc, stderr = _loader[0]
    request = {"kind": kind, "device": device, "inputs": str(inputs), "out": str(out),
               "programs": [str(programs[n]) for n in names]}
    timer = threading.Timer(FRESH_PROCESS_TIMEOUT_S, proc.kill)
    timer.start()
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps(request) + "\n")
        proc.stdin.flush()
        answer = proc.stdout.readline()
    except OSError:
        answer = ""
    finally:
        timer.cancel()
    if answer.strip() != "done" or not out.exists():
        proc.kill()
        stderr.seek(0)
        tail = " | ".join(stderr.read().strip().splitlines()[-3:])[:400]
        return {}, dict.fromkeys(names, f"the fresh process died or hung (over {FRESH_PROCESS_TIMEOUT_S:g} s) with "
                                        f"code {proc.wait()}: {tail}")
    saved = torch.load(out, map_location="cpu", weights_only=True)
    results = {names[int(i)]: tensors.flatten(v) for i, v in saved["results"].items()}
    return results, {names[int(i)]: why for i, why in saved["errors"].items()}


def _path(spec: CheckSpec, what: str) -> Path:
    base = crossversion.store_path(spec)
    return base.with_name(f"{base.stem}-{spec.aspect}-{what}{SUFFIX[spec.aspect] if what == 'program' else '.pt'}")
