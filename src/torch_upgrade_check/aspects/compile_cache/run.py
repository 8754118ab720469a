"""compile-cache: a second, fresh process that compiles the workload with the first one's Inductor caches must load
what the first compiled and compute what it computed.

Teams ship torch.compile with its caches: a restarted job, a second CI run or a serving replica compiles from the
FX graph cache and AOTAutograd's cache that an earlier process wrote, and an upgrade can break exactly that path (an
Inductor assertion that fires only on a graph loaded from the FX graph cache, pytorch#187484) while a cold compile,
which the `compile` check runs with the caches off, is fine.

Process 1 is the worker: Dynamo reset, the model compiled (`compiling.compiled`: as the workload's `compile:`
options say) in a fresh, empty Inductor
cache of its own (torch's `fresh_cache`, kept), the FX graph cache and AOTAutograd's cache on, and the forward run
(and, for a workload with a loss, the training step) twice: the cold outputs, and whether the cold compile repeats
itself bitwise. Process 2 is a fresh interpreter (`python -m torch_upgrade_check.aspects.compile_cache.run REQUEST`) with
that cache folder, the worker's CPU threads, weights and inputs: it compiles the model again, runs the same calls,
and reports what Inductor's counters say it hit, missed and bypassed. Its outputs must be bitwise the cold ones
where the cold compile repeats itself bitwise (a cache hit loads the kernels the cold compile generated: the same
code on the same inputs and threads), else within the dtype's tolerance of them (kernels whose reductions are not
run-to-run deterministic, as atomics on a GPU). Both compile times are reported: the first forward and training step,
in each process; process 2's compiler probes (g++ building each vector ISA's test, once a cache folder) untimed.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from torch_upgrade_check.model import CheckSpec
from torch_upgrade_check.worker import compiling, devices, first_line, tensors
from torch_upgrade_check.worker.instance import (
    Instance,
    Skip,
    add_python_path,
    build,
    resolve_factory,
    tolerances,
)

WARM_TIMEOUT_S = 120.0  # process 2, torch's import included; at least 3x the cold compile
CACHE_ENV = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")  # what fresh_cache sets: process 2 gets the same
# Inductor's (FX graph cache) and AOTAutograd's cache counters, as torch names them
COUNTERS = {"fx_hit": ("inductor", "fxgraph_cache_hit"), "fx_miss": ("inductor", "fxgraph_cache_miss"),
            "fx_bypass": ("inductor", "fxgraph_cache_bypass"), "aot_hit": ("aot_autograd", "autograd_cache_hit"),
            "aot_miss": ("aot_autograd", "autograd_cache_miss"), "aot_saved": ("aot_autograd", "autograd_cache_saved"),
            "aot_bypass": ("aot_autograd", "autograd_cache_bypass")}


def run(spec: CheckSpec, factory: Callable[..., Any], inst: Instance, device: devices.Device) -> dict[str, Any]:
    import torch._dynamo

    fresh = compiling.fresh_cache()
    training = inst.loss is not None and "gradients" not in inst.skip
    with tempfile.TemporaryDirectory(prefix="tuc-compile-cache-") as tmp:
        folder = Path(tmp)
        torch._dynamo.reset()
        if spec.device == "cpu":
            _probe_compiler()  # untimed, in the worker's own cache folder (a worker that compiled before: in memory)
        probe_dir = os.environ.get(CACHE_ENV[0], "")
        try:
            kept = fresh(dir=tmp, delete=False)
        except TypeError as e:  # an older torch whose fresh cache cannot keep its folder
            raise Skip(f"torch {torch.__version__}'s fresh Inductor cache cannot keep its folder for a second "
                       f"process ({first_line(e)})") from None
        with kept, caches_on():
            cache_env = {k: os.environ[k] for k in CACHE_ENV if k in os.environ}
            before = cache_counts()
            compiled = compiling.compiled(spec, inst)
            cold, cold_times, step_error = calls(spec, inst, compiled, device, training)
            again, _, _ = calls(spec, inst, compiled, device, training and not step_error)
            cold_cache = {k: v - before[k] for k, v in cache_counts().items()}
        torch._dynamo.reset()  # what this worker compiles next must not run this check's compiled code
        repeatable = bool(tensors.bitwise_diff(cold, again)["bitwise_equal"])
        save_state(inst, folder / "state.pt")
        request = {"spec": spec.to_dict(), "threads": torch.get_num_threads(), "python_path": list(sys.path),
                   "state": str(folder / "state.pt"), "outputs": str(folder / "warm.pt"),
                   "result": str(folder / "warm.json"), "training": training and not step_error,
                   "probe": spec.device == "cpu" and any(Path(cache_env.get(CACHE_ENV[0], tmp)).rglob("*.so")),
                   "probe_dir": probe_dir}
        (folder / "request.json").write_text(json.dumps(request))
        timeout = max(WARM_TIMEOUT_S, 3 * sum(cold_times.values()))
        warm = _warm_process(folder, cache_env, timeout)
        metrics: dict[str, Any] = {
            "cold_compile_s": sum(cold_times.values()), "cold_times_s": cold_times, "cold_cache": cold_cache,
            "cold_repeatable": repeatable, "training_step": bool(request["training"]),
            **({"training_step_error": step_error} if step_error else {}), **warm["metrics"],
        }
        if "warm_error" in metrics:
            return metrics
        outputs = torch.load(folder / "warm.pt", weights_only=True)
    rtol, atol = tolerances(spec, inst)
    return {**metrics, **judge(cold, outputs, repeatable, rtol, atol)}


def judge(cold: dict[str, torch.Tensor], warm: dict[str, torch.Tensor], repeatable: bool, rtol: float, atol: float
          ) -> dict[str, Any]:
    """The warm process's outputs against the cold compile's: bitwise where the cold compile repeats itself bitwise,
    else every element within the dtype's tolerance of the cold output. Whether they are within that tolerance is
    kept either way (`warm_within_tolerance`): a warm process that missed the cache compiled again, and under
    max-autotune a fresh compile may pick another kernel, so the rule reads it beside the hits and misses."""
    m = tensors.compare(warm, cold, rtol=rtol, atol=atol)
    differing = [t["name"] for t in m["per_tensor"] if t["mismatched"]] + list(m.get("uncompared") or [])
    within = {"warm_within_tolerance": not differing, "rtol": rtol, "atol": atol}
    if repeatable:
        diff = tensors.bitwise_diff(cold, warm)
        extra = sorted(set(warm) - set(cold))
        return {"rule": "bitwise", "warm_equal": diff["bitwise_equal"] and not extra,
                "differing_tensors": diff["differing_tensors"] + len(extra), "compared_tensors": diff["compared_tensors"],
                "max_abs_diff": diff["max_abs_diff"], "first_differing": (diff["first_differing"] + extra)[:5],
                **within, **({"beyond_tolerance": differing[:5], "beyond_tolerance_tensors": len(differing)} if differing else {})}
    return {"rule": "tolerance", **within, "warm_equal": not differing,
            "differing_tensors": len(differing), "compared_tensors": m["tensors"], "max_abs_diff": m["max_abs_err"],
            "first_differing": differing[:5]}


@contextlib.contextmanager
def caches_on() -> Iterator[None]:
    """Inductor's FX graph cache and AOTAutograd's cache on (their defaults; set anyway: an environment variable of the
    team's may have turned them off, and the check is of them), local only."""
    from torch._functorch import config as functorch_config
    from torch._inductor import config

    inductor = {k: v for k, v in (("fx_graph_cache", True), ("force_disable_caches", False)) if hasattr(config, k)}
    aot = {"enable_autograd_cache": True} if hasattr(functorch_config, "enable_autograd_cache") else {}
    with config.patch(**inductor), functorch_config.patch(**aot):
        yield


def cache_counts() -> dict[str, int]:
    from torch._dynamo.utils import counters

    return {name: int(counters[group][key]) for name, (group, key) in COUNTERS.items()}


def calls(spec: CheckSpec, inst: Instance, compiled: Any, device: devices.Device, training: bool
          ) -> tuple[dict[str, torch.Tensor], dict[str, float], str]:
    """The compiled forward (no grad) and, when `training`, the compiled training step: their outputs and gradients
    (copies, which `compiling` makes: under CUDA graphs a later call reuses their memory), each call's seconds, and
    the training step's error where it raised (the forward is then what is compared)."""
    opts = compiling.options(spec)
    if isinstance(inst.model, torch.nn.Module):
        inst.model.eval()
    device.synchronize()
    start = time.perf_counter()
    out = compiling.outputs(compiled, inst.inputs, opts)
    device.synchronize()
    times = {"forward": time.perf_counter() - start}
    if training:
        start = time.perf_counter()
        try:
            out.update(compiling.step(inst, compiled, opts))
        except Exception as e:  # an autograd.Function whose backward Dynamo cannot trace: `compile` says so too
            return out, times, f"{type(e).__name__}: {first_line(e)}"[:300]
        device.synchronize()
        times["training_step"] = time.perf_counter() - start
    return out, times, ""


def save_state(inst: Instance, path: Path) -> None:
    """The worker's weights and inputs, on the host, for process 2 (a factory need not build the same ones twice)."""
    model = inst.model.state_dict() if isinstance(inst.model, torch.nn.Module) else None
    torch.save({"model": {k: tensors.host(v) for k, v in model.items()} if model is not None else None,
                "inputs": [tensors.host(x) if isinstance(x, torch.Tensor) else None for x in inst.inputs],
                "requires_grad": [isinstance(x, torch.Tensor) and x.requires_grad for x in inst.inputs]}, path)


def restore_state(inst: Instance, path: Path, device: str) -> None:
    saved = torch.load(path, weights_only=True)
    if saved["model"] is not None and isinstance(inst.model, torch.nn.Module):
        inst.model.load_state_dict(saved["model"])
    inst.inputs = tuple(x if mine is None else mine.to(device).requires_grad_(grad) if mine.is_floating_point()
                        else mine.to(device) for x, mine, grad in zip(inst.inputs, saved["inputs"], saved["requires_grad"]))


def _warm_process(folder: Path, cache_env: dict[str, str], timeout: float) -> dict[str, Any]:
    """Process 2, bounded by `timeout` (it and whatever it started are killed then): its metrics, or why it gave none
    (`warm_error`: its exception, its exit, or the timeout, with its output's last lines)."""
    log = folder / "warm.log"
    started = time.perf_counter()
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "torch_upgrade_check.aspects.compile_cache.run",
                                 str(folder / "request.json")], stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, **cache_env}, start_new_session=True)
        try:
            code: int | None = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)  # Inductor's compile workers too
            proc.wait()
    seconds = time.perf_counter() - started
    tail = "\n".join(log.read_text(errors="replace").splitlines()[-20:])
    result = folder / "warm.json"
    if code == 0 and result.exists():
        warm = json.loads(result.read_text())
        if not warm.get("error"):
            return {"metrics": {**warm, "warm_process_s": seconds}}
        return {"metrics": {"warm_error": f"raised {warm['error']}", "warm_traceback": warm.get("traceback", ""),
                            "warm_process_s": seconds, **{k: v for k, v in warm.items() if k.startswith("warm_cache")}}}
    why = (f"did not finish within {timeout:.0f} s" if code is None else
           f"was killed by signal {-code}" if code < 0 else f"exited with status {code} without a result")
    return {"metrics": {"warm_error": why, "warm_exit": code, "warm_tail": tail, "warm_process_s": seconds}}


def main(argv: list[str]) -> int:
    """Process 2: compile the workload with process 1's caches (the environment names them), run the same calls, save
    the outputs and write what it hit, or the error it raised."""
    request = json.loads(Path(argv[0]).read_text())
    add_python_path(request["python_path"])
    torch.set_num_threads(int(request["threads"]))
    spec = CheckSpec.from_dict(request["spec"])
    device = devices.get(spec.device)
    result: dict[str, Any] = {}
    try:
        factory = resolve_factory(spec)
        with device.precision(spec.dtype):
            inst = build(factory, spec.device, devices.DTYPES[spec.dtype])
            restore_state(inst, Path(request["state"]), spec.device)
            start = time.perf_counter()
            if request["probe"]:
                _probe_compiler(request["probe_dir"])
            result["warm_setup_s"] = time.perf_counter() - start
            with caches_on():
                before = cache_counts()
                try:
                    outputs, times, step_error = calls(spec, inst, compiling.compiled(spec, inst), device,
                                                       request["training"])
                finally:
                    result["warm_cache"] = {k: v - before[k] for k, v in cache_counts().items()}
        result.update({"warm_compile_s": sum(times.values()), "warm_times_s": times})
        if step_error:
            raise RuntimeError(f"the compiled training step raised {step_error}")
        torch.save(outputs, request["outputs"])
    except Exception as e:
        result.update({"error": _error_line(e),
                       "traceback": "".join(traceback.format_exception(e))[-4000:]})
    part = Path(request["result"] + ".tmp")
    part.write_text(json.dumps(result))
    part.replace(request["result"])
    return 0


def _error_line(e: BaseException) -> str:
    """`AssertionError: …`, or for an error that wraps another (Dynamo's BackendCompilerFailed: "backend='inductor'
    raised:") both: `BackendCompilerFailed (AssertionError: …)`."""
    inner = getattr(e, "inner_exception", None) or e.__cause__
    text = f"{type(e).__name__}: {first_line(e)}"
    if isinstance(inner, BaseException) and inner is not e:
        text = f"{type(e).__name__} ({type(inner).__name__}: {first_line(inner)})"
    return text[:300]


def _probe_compiler(folder: str = "") -> None:
    """What a new process pays once before its first C++ kernel, untimed in both processes: Inductor's compiler probes
    (g++ building each vector ISA's test: 15-20 s on a busy 2-core machine), which torch keeps in a cache folder and
    the process in memory. Run in `folder` (process 1's own cache folder, where they are already built), not in the
    check's fresh one; process 2 asks for them only where process 1 built C++ kernels (a shared library there)."""
    own = os.environ.get(CACHE_ENV[0])
    if folder:
        os.environ[CACHE_ENV[0]] = folder
    try:
        from torch._inductor import cpu_vec_isa

        cpu_vec_isa.pick_vec_isa()
    except Exception:  # a torch without the probe: the timed compile pays what it pays
        pass
    finally:
        if own is None:
            os.environ.pop(CACHE_ENV[0], None)
        else:
            os.environ[CACHE_ENV[0]] = own


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # Inductor's compile workers watch this process and exit with it: no teardown to wait for
