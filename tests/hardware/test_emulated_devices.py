"""The worker's real `cuda` and `mps` code, run on this CPU under an emulation of each backend (tests/harness).

Each test here failed before its fix: MPS errored on nearly every check (float64 goldens) or, where
MPS float64 silently gives zeros, passed everything vacuously; FlexAttention errored on MPS (inputs
requiring grad) and in CUDA's cross-backend check (the CPU side asked for a backward it lacks); its
gradients were never compared; TF32 failed cnn on Ampere; MPS memory read 0 once the pool was warm;
compile under a torch that ran the model eagerly passed.
"""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest
from conftest import load_report, results_by_id, run_cli
from harness import interpreter

pytestmark = pytest.mark.usefixtures("torch_python")


def emulated(torch_python: str, folder: Path, device: str, **options: str) -> str:
    opts = {f"TUC_EMULATE_{k.upper()}": v for k, v in options.items()}
    return str(interpreter(torch_python, folder, emulate=device, options=opts))


def run(python: str, out: Path, device: str, *only: str) -> tuple[subprocess.CompletedProcess[str], dict[str, dict]]:
    args = ["run", "--python", python, "--device", device, "--out", str(out), "--no-job-summary", "--timeout", "300"]
    for o in only:
        args += ["--only", o]
    proc = run_cli(*args)
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc, results_by_id(load_report(out))


def test_the_emulation_enforces_each_backends_constraints(tmp_path: Path, torch_python: str) -> None:
    """The oracle itself: what the emulated backends refuse, round, delay and count."""
    script = textwrap.dedent("""
        import json, time, torch
        from torch.nn.attention.flex_attention import flex_attention
        kind = torch.ones(1).to("mps" if torch.backends.mps.is_available() else "cuda").device.type
        x = torch.randn(64, 64).to(kind)
        out = {"device": str(x.device), "cpu_first": float(x.cpu().double().sum()) != 0.0}
        try:
            out["straight_to_f64"] = float(x.to("cpu", torch.float64).abs().sum())
        except TypeError as e:
            out["straight_to_f64"] = str(e)
        q = torch.randn(1, 1, 128, 16).to(kind).requires_grad_()
        try:
            flex_attention(q, q, q).sum().backward()
            out["flex_backward"] = "ok"
        except NotImplementedError as e:
            out["flex_backward"] = str(e)
        if kind == "cuda":
            a = torch.randn(256, 256) * 1.0001
            exact = a @ a
            torch.backends.cuda.matmul.allow_tf32 = True
            out["tf32_err"] = float(((a.to(kind) @ a.to(kind)).cpu() - exact).abs().max())
            torch.backends.cuda.matmul.allow_tf32 = False
            out["ieee_err"] = float(((a.to(kind) @ a.to(kind)).cpu() - exact).abs().max())
            torch.backends.cuda.matmul.fp32_precision = "tf32"  # the new API alone: the legacy flag disagrees
            try:
                a.to(kind) @ a.to(kind)
                out["mixed_apis"] = "ran"
            except RuntimeError as e:
                out["mixed_apis"] = str(e)
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            y = torch.empty(1024, 1024, device=kind)
            out["peak_growth"] = torch.cuda.max_memory_allocated() - base
            del y
            t0 = time.perf_counter()
            for _ in range(5):
                z = x @ x
            out["unsynced_s"] = time.perf_counter() - t0
            torch.cuda.synchronize()
            out["synced_s"] = time.perf_counter() - t0
            import os
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:  # CUDA was initialised above: a forked child cannot start it again
                try:
                    torch.zeros(1, device=kind)
                    said = "ran"
                except RuntimeError as e:
                    said = str(e)
                os.write(w, said.encode())
                os._exit(0)
            os.waitpid(pid, 0)
            out["forked"] = os.read(r, 1000).decode()
            out["pinned"] = [torch.ones(2).pin_memory().is_pinned(), torch.ones(2).is_pinned(),
                             torch.empty(0, 4).pin_memory().is_pinned()]  # no memory to pin, as on CUDA
        else:
            torch.mps.empty_cache()
            before = torch.mps.driver_allocated_memory()
            y = torch.empty(1024, 1024, device=kind)
            del y
            grown = torch.mps.driver_allocated_memory() - before
            before = torch.mps.driver_allocated_memory()  # warm: the freed block stays in the pool
            y = torch.empty(1024, 1024, device=kind)
            out["pool_growth_cold_then_warm"] = [grown, torch.mps.driver_allocated_memory() - before]
        print(json.dumps(out))
    """)
    results = {}
    for device, opts in (("mps", {}), ("mps", {"mps_float64": "zeros"}), ("cuda", {"kernel_us": "20000"})):
        python = emulated(torch_python, tmp_path / f"{device}{len(results)}", device, **opts)
        proc = subprocess.run([python, "-c", script], capture_output=True, text=True, timeout=300, check=False)
        assert proc.returncode == 0, proc.stderr[-3000:]
        results[f"{device}{len(results)}"] = json.loads(proc.stdout.strip().splitlines()[-1])
    mps, mps_zeros, cuda = results["mps0"], results["mps1"], results["cuda2"]
    assert mps["device"] == "mps:0" and mps["cpu_first"]
    assert "MPS framework doesn't support float64" in mps["straight_to_f64"]
    assert mps_zeros["straight_to_f64"] == 0.0  # the silent garbage of pytorch#197715
    assert "FlexAttention does not support backward on MPS" in mps["flex_backward"]  # torch's own check, on MPS
    assert mps["pool_growth_cold_then_warm"] == [2**22, 0]  # why pool growth cannot measure a warm worker's peak
    assert cuda["flex_backward"] == "ok" and cuda["device"] == "cuda:0"
    assert cuda["tf32_err"] > 100 * max(cuda["ieee_err"], 1e-6)
    assert "mix of the legacy and new APIs" in cuda["mixed_apis"]  # ATen's getter, asked at the matmul as cuBLAS does
    assert cuda["peak_growth"] == 4 * 2**20
    assert cuda["unsynced_s"] < 0.05 < 0.1 < cuda["synced_s"]  # 5 kernels of 20 ms are paid at synchronize
    assert cuda["forked"].startswith("Cannot re-initialize CUDA in forked subprocess") and cuda["pinned"] == [True, False, False]


@pytest.mark.parametrize("float64", ["raise", "zeros"])
def test_mps_checks_pass_and_compare_real_numbers(tmp_path: Path, torch_python: str, float64: str) -> None:
    python = emulated(torch_python, tmp_path / "py", "mps", mps_float64=float64)
    not_compile = ("numerics", "cross-backend", "determinism", "latency", "memory")  # compile is not emulated
    proc, by_id = run(python, tmp_path / "out", "mps", *(f"mlp[float32]/{a}" for a in not_compile),
                      *(f"flex_attention_causal[float32]/{a}" for a in not_compile), "sdpa[bfloat16]/numerics",
                      "matmul[float16]/numerics")
    assert proc.returncode == 0, proc.stdout[-4000:]
    for check in ("mlp[float32]/numerics", "mlp[float32]/cross-backend", "sdpa[bfloat16]/numerics"):
        tensors = {t["name"]: t for t in by_id[check]["metrics"]["per_tensor"]}
        assert "grad:0.weight" in tensors or "grad:input0" in tensors, check  # gradients compared
        assert all(t["scale"] > 1e-3 and t["max_abs_err"] > 0 for t in tensors.values()), check  # not zeros vs zeros
    assert by_id["mlp[float32]/memory"]["metrics"]["peak_bytes"] > 0
    assert "current_allocated_memory sampled after every op" in by_id["mlp[float32]/memory"]["metrics"]["memory_api"]
    flex = by_id["flex_attention_causal[float32]/numerics"]
    assert flex["outcome"] == "passed"
    assert "gradients not checked: FlexAttention forward and backward does not run on mps" in flex["reason"]
    assert "FlexAttention does not support backward on MPS" in flex["reason"]
    assert by_id["flex_attention_causal[float32]/determinism"]["outcome"] == "skipped"
    assert "does not support backward on MPS" in by_id["flex_attention_causal[float32]/determinism"]["reason"]
    assert by_id["flex_attention_causal[float32]/cross-backend"]["outcome"] == "passed"


@pytest.mark.serial  # an A/B measurement whose verdict must be `unchanged`: run alone, after the parallel phase
def test_mps_memory_ab_is_measured_not_zero(tmp_path: Path, torch_python: str) -> None:
    """compare's memory rounds reuse one instance in a warm worker: a pool-growth counter read 0 there."""
    python = emulated(torch_python, tmp_path / "py", "mps")
    proc = run_cli("compare", "--baseline-python", python, "--candidate-python", python, "--device", "mps",
                   "--only", "mlp[float32]/memory", "--out", str(tmp_path / "out"), "--no-job-summary")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads((tmp_path / "out" / "report.json").read_text())
    mem = results_by_id(doc["reports"][1])["mlp[float32]/memory"]
    assert mem["outcome"] == "passed" and mem["metrics"]["change"] == "unchanged"
    assert mem["metrics"]["baseline_median"] > 0 and mem["metrics"]["ratio"] == 1.0


def test_cuda_float32_runs_in_ieee_and_tf32_is_checked_on_its_own(tmp_path: Path, torch_python: str) -> None:
    python = emulated(torch_python, tmp_path / "py", "cuda", capability="8.0")
    proc, by_id = run(python, tmp_path / "out", "cuda", "cnn[*]/numerics", "matmul[*]/numerics",
                      "transformer_block[*]/numerics", "transformer_block[float32]/fsdp2")
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert by_id["cnn[float32]/numerics"]["metrics"]["precision"]["cudnn.conv"] == "ieee"
    assert by_id["cnn[tf32]/numerics"]["metrics"]["precision"]["cudnn.conv"] == "tf32"
    assert "TF32 simulated on the CPU" in by_id["transformer_block[tf32]/numerics"]["reason"]
    assert by_id["transformer_block[float32]/fsdp2"]["outcome"] == "skipped"
    assert "2 or more GPUs; 1 present" in by_id["transformer_block[float32]/fsdp2"]["reason"]
    env = load_report(tmp_path / "out")["environment"]
    assert env["cuda_device"]["compute_capability"] == "sm80" and env["cuda_devices"] == ["NVIDIA emulated sm80"]


def test_tf32_is_set_through_both_apis_and_restored_exactly(tmp_path: Path, torch_python: str) -> None:
    """On torch 2.9+ the [tf32] checks set TF32 so that none of ATen's getters raise (they did: only the new API
    was set), matmuls round to TF32 inside and run exactly outside, and every flag is as it was afterwards,
    whatever the user had set before (the legacy way, the new way, or nothing)."""
    script = textwrap.dedent("""
        import json, torch
        from torch_upgrade_check.worker import devices, precision
        b = torch.backends
        PATHS = ("", "cuda.matmul", "cudnn", "cudnn.conv", "cudnn.rnn", "mkldnn", "mkldnn.matmul")

        def state():
            out = {p or "generic": getattr(precision.attr(p), "fp32_precision", "absent") for p in PATHS}
            for name, get in (("cublas", torch._C._get_cublas_allow_tf32), ("cudnn", torch._C._get_cudnn_allow_tf32),
                              ("legacy", torch.get_float32_matmul_precision)):
                try:
                    out[name] = get()
                except RuntimeError as e:
                    out[name] = "raises"
            return out

        def matmul_err():
            a = torch.randn(128, 128) * 1.0001
            return float(((a.to("cuda") @ a.to("cuda")).cpu() - a @ a).abs().max())

        starts = {"default": lambda: None, "legacy high": lambda: torch.set_float32_matmul_precision("high"),
                  "cudnn off": lambda: setattr(b.cudnn, "allow_tf32", False),
                  "new api": lambda: (setattr(b.cudnn, "allow_tf32", True), setattr(b.cudnn.rnn, "fp32_precision", "tf32"),
                                      setattr(b.mkldnn.matmul, "fp32_precision", "ieee"))}
        out = {}
        for name, start in starts.items():
            start()
            before = state()
            seen = {}
            for mode in ("tf32", "float32"):
                with devices.get("cuda").precision(mode) as flags:
                    seen[mode] = {"flags": flags, "state": state(), "err": matmul_err()}
            out[name] = {"before": before, "after": state(), "seen": seen}
        print(json.dumps(out))
    """)
    python = emulated(torch_python, tmp_path / "py", "cuda", capability="8.0")
    proc = subprocess.run([python, "-c", script], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for name, got in json.loads(proc.stdout.strip().splitlines()[-1]).items():
        assert got["after"] == got["before"], name
        tf32, ieee = got["seen"]["tf32"], got["seen"]["float32"]
        assert "raises" not in tf32["state"].values() and "raises" not in ieee["state"].values(), name
        assert tf32["state"]["cublas"] is True and tf32["state"]["cudnn"] is True and tf32["state"]["legacy"] == "high"
        assert ieee["state"]["cublas"] is False and ieee["state"]["cudnn"] is False and ieee["state"]["legacy"] == "highest"
        assert tf32["flags"]["cudnn.conv"] == "tf32" and ieee["flags"]["cudnn.conv"] == "ieee"
        assert tf32["err"] > 100 * max(ieee["err"], 1e-6), name


def test_a_torch_that_uses_tf32_despite_the_flags_fails_float32(tmp_path: Path, torch_python: str) -> None:
    python = emulated(torch_python, tmp_path / "py", "cuda", capability="8.0", tf32="always")
    proc, by_id = run(python, tmp_path / "out", "cuda", "cnn[*]/numerics", "matmul[*]/numerics")
    assert proc.returncode == 1
    assert by_id["cnn[float32]/numerics"]["outcome"] == "failed"
    assert by_id["matmul[float32]/numerics"]["outcome"] == "failed"
    assert by_id["cnn[tf32]/numerics"]["outcome"] == "passed"  # what TF32 is allowed to do, it may


def test_cuda_flex_gradients_are_compared_and_cross_backend_runs(tmp_path: Path, torch_python: str) -> None:
    python = emulated(torch_python, tmp_path / "py", "cuda")
    proc, by_id = run(python, tmp_path / "out", "cuda", "flex_attention_alibi[float32]/numerics",
                      "flex_attention_alibi[float32]/cross-backend", "flex_attention_alibi[float32]/determinism")
    assert proc.returncode == 0, proc.stdout[-4000:]
    for check in ("numerics", "cross-backend"):
        r = by_id[f"flex_attention_alibi[float32]/{check}"]
        names = {t["name"] for t in r["metrics"]["per_tensor"]}
        assert names == {"output", "grad:input0", "grad:input1", "grad:input2"} and "uncompared" not in r["metrics"]
    assert "gradients judged against the fp64 golden alone" in by_id["flex_attention_alibi[float32]/cross-backend"]["reason"]
    assert by_id["flex_attention_alibi[float32]/determinism"]["outcome"] == "passed"
    # flex-grad-5pct failing this numerics check: tests/aspects/numerics/test_numerics_breakage.py


@pytest.mark.fast  # in the fast tier: one of the few e2e tests that together run every module
@pytest.mark.parametrize(("capability", "needs"), [("9.0", "compute capability >= 10.0 (SM100+); this GPU is sm90"),
                                                    ("10.0", "the flash-attn-4 package")])
def test_deterministic_flex_backward_names_what_flash_needs(tmp_path: Path, torch_python: str, capability: str,
                                                            needs: str) -> None:
    python = emulated(torch_python, tmp_path / "py", "cuda", capability=capability)
    _, by_id = run(python, tmp_path / "out", "cuda", "flex_attention_causal[float32]/deterministic-backward")
    r = by_id["flex_attention_causal[float32]/deterministic-backward"]
    # torch.compile cannot run under the emulation, so the TRITON run errors here; the reason still says
    # exactly what BACKEND='FLASH' would need on this GPU
    assert f"BACKEND='FLASH' not run: needs {needs}" in r["reason"]
    if capability == "10.0":
        assert "compute capability" not in r["reason"]


def test_latency_waits_for_the_device(tmp_path: Path, torch_python: str) -> None:
    python = emulated(torch_python, tmp_path / "py", "cuda", kernel_us="3000")
    _, by_id = run(python, tmp_path / "out", "cuda", "matmul[float32]/latency")
    assert by_id["matmul[float32]/latency"]["metrics"]["median_ms"] >= 3.0  # one 3 ms kernel per call, paid at sync


def test_compile_that_ran_eagerly_never_passes(tmp_path: Path, torch_python: str) -> None:
    """Under the emulation Dynamo refuses to trace and runs the frame eagerly; so does a broken torch."""
    _, by_id = run(emulated(torch_python, tmp_path / "py", "cuda"), tmp_path / "out", "cuda", "mlp[float32]/compile")
    assert by_id["mlp[float32]/compile"]["outcome"] == "failed"
    assert "compiled no graph" in by_id["mlp[float32]/compile"]["reason"]


@pytest.mark.parametrize("device", ["cuda", "mps"])
def test_a_checkpoint_keeps_and_restores_the_devices_rng_state(tmp_path: Path, torch_python: str, device: str) -> None:
    """The device's own generator is saved beside the CPU's (on CUDA every GPU's), and the resumed step,
    whose inputs are jittered with the device's random numbers, is bitwise the uninterrupted one."""
    python = emulated(torch_python, tmp_path / "py", device)
    proc, by_id = run(python, tmp_path / "out", device, "mlp[float32]/checkpoint", "cnn[float32]/checkpoint")
    assert proc.returncode == 0, proc.stdout[-4000:]
    for check in ("mlp[float32]/checkpoint", "cnn[float32]/checkpoint"):
        assert by_id[check]["outcome"] == "passed", by_id[check]["reason"]
        assert by_id[check]["metrics"]["rng_states"] == ["cpu", device]


@pytest.mark.parametrize("device", ["cuda", "mps"])
def test_an_autocast_step_runs_on_the_device_with_its_own_grad_scaler(tmp_path: Path, torch_python: str,
                                                                      device: str) -> None:
    """torch.autocast and torch.amp.GradScaler with the device's name: bfloat16 and float16 modules on the device,
    a float16 overflow skipped by the device's scaler."""
    python = emulated(torch_python, tmp_path / "py", device)
    proc, by_id = run(python, tmp_path / "out", device, "mlp[float32]/amp", "transformer_block[float32]/amp")
    assert proc.returncode == 0, proc.stdout[-4000:]
    for check in ("mlp[float32]/amp", "transformer_block[float32]/amp"):
        result = by_id[check]
        assert result["outcome"] == "passed", result["reason"]
        assert result["metrics"]["autocast_device"] == device
        assert set(result["metrics"]["checked"]) == {"bfloat16", "float16"}
        assert result["metrics"]["checked"]["float16"]["overflow_skipped"] is True


@pytest.mark.parametrize("device", ["cuda", "mps"])
def test_a_kernel_changed_in_every_dtype_is_named_on_the_device(tmp_path: Path, torch_python: str, device: str) -> None:
    """cross-version on an accelerator: the baseline's fp64 golden (MPS has none on the device: computed on the
    CPU), and the baseline's recorded ops replayed on the candidate's device, tensors to the host through
    tensors.host; the same torch on both sides passes bitwise."""
    check = "mlp[float32]/cross-version"

    def compared(baseline: str, candidate: str, out: Path) -> tuple[int, dict[str, dict]]:
        proc = run_cli("compare", "--baseline-python", baseline, "--candidate-python", candidate, "--device", device,
                       "--threads", "1", "--out", str(out), "--no-job-summary", "--only", check)
        assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
        return proc.returncode, results_by_id(load_report(out)["reports"][1])

    base = emulated(torch_python, tmp_path / "b", device)
    code, cand = compared(base, base, tmp_path / "aa")
    assert (code, cand[check]["outcome"]) == (0, "passed"), cand[check]["reason"]
    assert cand[check]["metrics"]["bitwise_equal_to_baseline"] is True
    broken = str(interpreter(torch_python, tmp_path / "c", emulate=device, breaks=["gelu-every-dtype"]))
    code, cand = compared(base, broken, tmp_path / "ab")
    assert (code, cand[check]["outcome"]) == (1, "failed"), cand[check]["reason"]
    assert cand[check]["reason"].startswith("first aten op that changed: aten.gelu.default in 1"), cand[check]["reason"]
    assert (tmp_path / "ab" / "first-divergent-op" / f"mlp-float32-{device}.pt").exists()


def test_the_mps_cpu_fallback_is_recorded(tmp_path: Path, torch_python: str) -> None:
    """PYTORCH_ENABLE_MPS_FALLBACK=1 runs ops MPS lacks on the CPU, silently: the report says it was set."""
    python = emulated(torch_python, tmp_path / "py", "mps")
    proc = run_cli("run", "--python", python, "--device", "mps", "--only", "matmul[float32]/numerics", "--out",
                   str(tmp_path / "out"), "--no-job-summary", env={"PYTORCH_ENABLE_MPS_FALLBACK": "1"})
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert load_report(tmp_path / "out")["environment"]["mps_fallback"] == "1"


def test_mps_bfloat16_before_macos_14_is_a_skip_with_its_reason(tmp_path: Path, torch_python: str) -> None:
    """Below macOS 14 every op on an MPS bfloat16 tensor raises in ATen (the emulation does the same, and answers
    torch.backends.mps.is_macos_or_newer from TUC_EMULATE_MACOS): a skip that says so, not an error."""
    checks = ("sdpa[bfloat16]/numerics", "matmul[bfloat16]/numerics")
    proc, by_id = run(emulated(torch_python, tmp_path / "old", "mps", macos="13.6"), tmp_path / "old-out", "mps", *checks)
    for check in checks:
        assert by_id[check]["outcome"] == "skipped", by_id[check]
        assert by_id[check]["reason"].startswith("MPS has bfloat16 from macOS 14.0 on"), by_id[check]["reason"]
    proc, by_id = run(emulated(torch_python, tmp_path / "new", "mps", macos="14.5"), tmp_path / "new-out", "mps", *checks)
    assert proc.returncode == 0 and all(by_id[c]["outcome"] == "passed" for c in checks), proc.stdout[-3000:]


def test_the_sdpa_default_on_mps_is_reported_as_torch_takes_it(tmp_path: Path, torch_python: str) -> None:
    """ATen's SDPA asks its fused-backend chooser only where one is registered; on MPS `_fused_sdp_choice` has no
    kernel (the emulation raises as torch does) and the default is MATH. It read FLASH_ATTENTION here: the
    chooser's answer for the CPU tensors underneath the emulation."""
    proc, by_id = run(emulated(torch_python, tmp_path / "py", "mps"), tmp_path / "out", "mps", "sdpa[float32]/sdpa-backends")
    result = by_id["sdpa[float32]/sdpa-backends"]
    assert result["metrics"]["default_backend"] == {"causal": "MATH", "masked": "MATH", "tiled": "MATH"}, result
    assert "on MPS torch picks no fused backend: the default is MATH" in result["reason"], result["reason"]


def test_mps_fallback_ops_are_named_per_check_and_cross_backend_does_not_pass_as_mps(tmp_path: Path,
                                                                                    torch_python: str) -> None:
    """The emulated MPS lacks gelu (TUC_EMULATE_MPS_MISSING): with PYTORCH_ENABLE_MPS_FALLBACK=1 torch runs it on the
    CPU with a warning it gives once per process. Each check names the ops that fell back (also the second check
    in the same worker); a cross-backend check that passed so compared the CPU with itself for those ops: skipped,
    saying so. It passed as MPS before."""
    python = emulated(torch_python, tmp_path / "py", "mps", mps_missing="gelu")
    checks = ("mlp[float32]/numerics", "mlp[float32]/cross-backend", "matmul[float32]/numerics")
    proc = run_cli("run", "--python", python, "--device", "mps", *(f for c in checks for f in ("--only", c)),
                   "--out", str(tmp_path / "out"), "--no-job-summary", env={"PYTORCH_ENABLE_MPS_FALLBACK": "1"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    by_id = results_by_id(load_report(tmp_path / "out"))
    numerics, cross = by_id["mlp[float32]/numerics"], by_id["mlp[float32]/cross-backend"]
    assert numerics["outcome"] == "passed" and numerics["metrics"]["mps_cpu_fallback_ops"] == ["aten::gelu"]
    assert numerics["reason"].endswith("; ran on the CPU (PYTORCH_ENABLE_MPS_FALLBACK=1): aten::gelu")
    assert cross["outcome"] == "skipped" and cross["metrics"]["mps_cpu_fallback_ops"] == ["aten::gelu"], cross
    assert cross["reason"].startswith("not an MPS result: ran on the CPU (PYTORCH_ENABLE_MPS_FALLBACK=1): aten::gelu")
    matmul = by_id["matmul[float32]/numerics"]  # no op fell back: nothing said
    assert matmul["outcome"] == "passed" and matmul["metrics"]["mps_cpu_fallback_ops"] == []
    assert "PYTORCH_ENABLE_MPS_FALLBACK" not in matmul["reason"]
    # without the fallback, the op MPS lacks raises, naming it
    proc = run_cli("run", "--python", python, "--device", "mps", "--only", "mlp[float32]/numerics",
                   "--out", str(tmp_path / "raw"), "--no-job-summary", env={"PYTORCH_ENABLE_MPS_FALLBACK": "0"})
    raw = results_by_id(load_report(tmp_path / "raw"))["mlp[float32]/numerics"]
    assert raw["outcome"] == "error" and "'aten::gelu' is not currently implemented for the MPS device" in raw["reason"]
