"""Report inputs for the renderer tests, and the normalised renderings the golden files hold."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

from torch_upgrade_check.analysis.sides import mark_preexisting
from torch_upgrade_check.model import CheckResult, Outcome, Report
from torch_upgrade_check.report.annotations import annotations
from torch_upgrade_check.report.junit import build_junit, junit_to_string
from torch_upgrade_check.report.outputs import action_outputs
from torch_upgrade_check.report.summary import render_summary

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "golden"
XSD = HERE / "junit-10.xsd"
GOLDEN_FILES = ("summary.md", "junit.xml", "annotations.txt", "outputs.json")
PATHS = {"report": "out/report.json", "junit": "out/junit.xml", "summary": "out/summary.md"}

ENV = {
    "torch_version": "2.13.0+cpu",
    "torch_git": "0123456789abcdef",
    "python": "3.12.4",
    "os": "Linux-6.8.0-x86_64",
    "cpu": "AMD EPYC 9654 96-Core Processor",
    "threads": 8,
    "hostname": "runner-42",
}
CUDA_ENV = {**ENV, "torch_version": "2.13.0+cu126", "cuda": "12.6", "cudnn": "91002", "nccl": "2.26.2",
            "triton": "3.4.0", "cuda_devices": ["NVIDIA H100 80GB HBM3"], "driver": "570.124.06",
            "cuda_device": {"gpu": "NVIDIA H100 80GB HBM3", "compute_capability": "sm90"},
            "packages": {"torch": "2.13.0+cu126", "nvidia-cudnn-cu12": "9.10.2.21", "numpy": "2.3.1"}}
MPS_ENV = {**ENV, "torch_version": "2.13.0", "os": "macOS-15.3-arm64", "cpu": "Apple M3"}


def check(workload: str, aspect: str, outcome: Outcome = Outcome.PASSED, *, dtype: str = "float32",
          device: str = "cpu", **fields: Any) -> CheckResult:
    repro = f"torch-upgrade-check run --device {device} --only '{workload}[{dtype}]/{aspect}'"
    return CheckResult(workload, aspect, device, dtype, outcome, repro=fields.pop("repro", repro), **fields)


def report(*results: CheckResult, device: str = "cpu", label: str = "2.13.0+cpu", **fields: Any) -> Report:
    fields.setdefault("environment", ENV)
    return Report(
        tool_version="0.1.0",
        device=device,
        requested_device=fields.pop("requested_device", device),
        label=label,
        command=["torch-upgrade-check", "run", "--device", device],
        started="2025-06-01T12:00:00+00:00",
        finished="2025-06-01T12:03:10+00:00",
        complete=True,
        results=tuple(results),
        **fields,
    )


def tensor(name: str, numel: int, scale: float, err: float, *, mismatched: int = 0, nan: int = 0,
           **rmses: float) -> dict[str, Any]:
    """One compared tensor as the worker reports it; rmse defaults to a quarter of the max abs err."""
    return {"name": name, "numel": numel, "scale": scale, "max_abs_err": err, "mismatched": mismatched,
            "rmse": rmses.pop("rmse", err / 4), **rmses, "nan": nan}


def closeness(tensors: list[dict[str, Any]], *, max_rel_err: float | None = None, **extra: Any) -> dict[str, Any]:
    """A correctness check's metrics: per tensor, and the aggregates the worker derives from them."""
    numel = sum(t["numel"] for t in tensors)
    mismatched = sum(t["mismatched"] for t in tensors)
    errors = [float(t["max_abs_err"]) for t in tensors]
    return {"numel": numel, "tensors": len(tensors), "max_abs_err": max(errors),
            "max_rel_err": 3 * max(errors) if max_rel_err is None else max_rel_err,
            "mismatched_count": mismatched, "mismatched_share": mismatched / numel,
            "nan_count": sum(t["nan"] for t in tensors), "per_tensor": tensors, **extra}


# What a training step of each built-in workload compares: its output and its gradients (name, numel, scale).
SHAPES = {
    "resnet18": (("output", 8_000, 1.9), ("grad:conv1.weight", 9_408, 0.021), ("grad:fc.weight", 512_000, 0.004)),
    "transformer_block": (("output", 131_072, 1.0), ("grad:attn.in_proj_weight", 786_432, 0.0031),
                          ("grad:mlp.fc1.weight", 1_048_576, 0.0012)),
    "mlp": (("output", 640, 0.83), ("grad:fc1.weight", 200_704, 0.0009)),
}


def _numerics(workload: str, aspect: str = "numerics", dtype: str = "float32", err: float = 1.2e-7,
              **fields: Any) -> CheckResult:
    """A passing correctness check (unless `outcome` says otherwise): every tensor of the workload within
    tolerance, the gradients a little further off (relative to their scale) than the output."""
    extra = fields.pop("metrics", {})
    shapes = SHAPES.get(workload, (("output", 65_536, 1.0),))
    tensors = extra.pop("per_tensor", None) or [
        tensor(name, numel, scale, err * (1 if name == "output" else 0.5), rmse=err / (4 if name == "output" else 2) * scale,
               ref_rmse=err / 5 * scale) for name, numel, scale in shapes]
    metrics = {**closeness(tensors, max_rel_err=extra.pop("max_rel_err", None)), **extra}
    thresholds = {"rtol": 1.3e-6, "atol": 1e-5} if dtype == "float32" else {"rtol": 1.6e-2, "atol": 1e-5}
    outcome = fields.pop("outcome", Outcome.PASSED)
    if outcome is Outcome.PASSED:
        every = "the one tensor is" if len(tensors) == 1 else f"all {len(tensors)} tensors are"  # as closeness.judge says
        fields.setdefault("reason", f"{every} within tolerance (max abs err {metrics['max_abs_err']:.3g})")
    return check(workload, aspect, outcome, dtype=dtype, metrics=metrics, thresholds=thresholds, duration_s=0.412,
                 **fields)


def _latency(workload: str, median_ms: float, outcome: Outcome = Outcome.PASSED, **fields: Any) -> CheckResult:
    samples = [round(median_ms * (1 + (i % 5 - 2) / 100), 6) for i in range(30)]
    metrics = {"samples_ms": samples, "median_ms": median_ms, "iqr_ms": median_ms * 0.02, "threads": 8}
    # as analysis/verdicts.py judges a `run`: against a --max-latency-ms limit when one is set, else it only measures
    return check(workload, "latency", outcome, metrics=metrics, thresholds=fields.pop("thresholds", {}), duration_s=3.5,
                 **fields)


def _healthy(device: str = "cpu") -> list[CheckResult]:
    return [
        # relative error as the worker computed it before it left out goldens near zero: report.json only
        _numerics("resnet18", metrics={"max_rel_err": 15_166_603_265.0}),
        _numerics("resnet18", dtype="bfloat16", err=3.1e-3),
        _numerics("transformer_block", aspect="cross-backend", err=2.0e-6),
        _numerics("transformer_block", aspect="compile", metrics={"compile_time_s": 14.2}),
        check("mlp", "determinism", metrics={"bitwise_equal": True, "max_abs_diff": 0.0, "differing_tensors": 0}),
        _latency("resnet18", 12.4),
        _latency("mlp", 0.085),
        _latency("transformer_block", 3.2),
        check("resnet18", "memory", metrics={"peak_bytes": 187_432_960, "memory_api": "tracemalloc"}),
    ]


def _crash_and_timeout() -> Report:
    stderr = "\n".join(f"[worker] step {i}" for i in range(200)) + (
        "\nFatal Python error: Segmentation fault\n\nCurrent thread 0x00007f (most recent call first):\n"
        '  File "/venv/lib/python3.12/site-packages/torch/nn/functional.py", line 2280 in conv2d'
    )
    return report(
        _numerics("mlp"),
        check("resnet18", "numerics", Outcome.ERROR, reason="worker crashed with SIGSEGV (exit code -11)",
              details=f"stderr (last lines):\n{stderr}", duration_s=2.0),
        check("transformer_block", "compile", Outcome.ERROR, reason="timed out after 600 s",
              details="stderr (last lines):\n[inductor] compiling graph 3 of 5\n[inductor] autotuning mm", duration_s=600),
        check("resnet18", "latency", Outcome.NOT_RUN, reason="the worker crashed before this check started"),
        check("resnet18", "memory", Outcome.NOT_RUN, reason="the worker crashed before this check started"),
    )


HOSTILE = "evil|name`code`<script>alert(1)</script>\nnext%0A,a:b\x00\u202e\ud800 ```"


def _hostile() -> Report:
    return report(
        _numerics(HOSTILE, outcome=Outcome.FAILED, reason=f"max_abs_err 3e-2 > atol | {HOSTILE}",
                  details=f"```\n</details>\n<script>alert(2)</script>\n{HOSTILE}",
                  repro=f"torch-upgrade-check run --only '{HOSTILE}' ``` `x`",
                  metrics={"max_abs_err": 3e-2, "top_mismatches": [{"index": "(0, |1|)", "got": "<b>1</b>",
                                                                     "expected": 0.5, "abs_err": 0.5}]}),
        _latency("pipe|in|name", 1.5, Outcome.SKIPPED, reason="skipped: `nvidia-smi` said <none> | 50% done"),
        check("ok", "memory", metrics={"peak_bytes": 1024, "memory_api": "<img src=x onerror=alert(3)>|x"}),
        label="2.13.0+cpu|<b>bold</b>",
        environment={**ENV, "os": "Linux | <script>alert(4)</script>", "cpu": "a\nb"},
    )


def _matrix() -> list[Report]:
    cpu = report(*_healthy(), environment=ENV)
    cuda_checks = [dataclasses.replace(c, device="cuda") for c in _healthy() if c.workload != "mlp"]
    cuda_checks.append(_latency("resnet18", 19.7, Outcome.FAILED, device="cuda",
                                reason="median 19.7 ms vs 12.4 ms baseline (+59%, p=0.0001)"))
    cuda = report(*(c for c in cuda_checks if c.id != "resnet18[float32]/latency" or c.outcome is Outcome.FAILED),
                  device="cuda", label="2.13.0+cu126", environment=CUDA_ENV)
    mps = report(
        check("resnet18", "numerics", Outcome.SKIPPED, device="mps",
              reason="MPS not available: probe kernel failed: MPS backend out of memory"),
        _numerics("only_on_mps", device="mps"),
        device="mps", label="2.13.0", environment=MPS_ENV,
    )
    return [cpu, cuda, mps]


BASE_ENV = {**ENV, "torch_version": "2.12.0", "torch_git": "fedcba9876543210"}
CAND_ENV = {**ENV, "torch_version": "2.13.0"}
BASE_CUDA_ENV = {**CUDA_ENV, "torch_version": "2.12.0", "cudnn": "90800", "nccl": "2.21.5", "triton": "3.3.1",
                 "packages": {"torch": "2.12.0", "nvidia-cudnn-cu12": "9.8.0.87", "numpy": "2.3.1"}}
CAND_CUDA_ENV = {**CUDA_ENV, "torch_version": "2.13.0"}


def _ab(workload: str, aspect: str, change: str, baseline: float, ratio: float, *, device: str = "cpu",
        p_value: float = 0.41, spread: float = 0.02, confirmed: bool = False, batches: int | None = None,
        agreeing: int | None = None, more_pairs: int = 0, **fields: Any) -> CheckResult:
    """A candidate's latency or memory result with the A/B metrics a comparison adds, and the one-line reason the
    analysis writes (analysis/abjudge.py explain()). A change needs three agreeing fresh process pairs;
    "unchanged" settles in one."""
    outcome = {"regression": Outcome.FAILED, "suspicious": Outcome.SUSPICIOUS}.get(change, Outcome.PASSED)
    candidate = baseline * ratio
    batches = batches or (1 if change == "unchanged" else 3)
    agreeing = batches if agreeing is None and change in ("regression", "improved") else agreeing or 0
    rounds = 24 * batches
    low, high = round(ratio - spread, 6), round(ratio + spread, 6)
    ab = {"change": change, "ratio": ratio, "ci_low": low, "ci_high": high, "p_value": p_value,
          "baseline_median": baseline, "candidate_median": candidate, "rounds": rounds, "batches": batches,
          "agreeing_batches": agreeing, "confirmed": confirmed or change in ("regression", "improved"),
          "more_pairs": more_pairs, "threshold": 0.1}
    if aspect == "latency":
        samples = [round(candidate * (1 + (i % 5 - 2) / 100), 6) for i in range(rounds)]
        metrics = {"samples_ms": samples, "median_ms": candidate, "iqr_ms": candidate * 0.02, "threads": 8, **ab}
        what, up, down, increase, unit = "latency", "slower", "faster", "slowdown", _ms
    else:
        metrics = {"peak_bytes": int(candidate), "memory_api": "torch.cuda.max_memory_allocated", **ab}
        what, up, down, increase, unit = "peak memory", "more", "less", "growth", _mib
    size = ("the same" if spread == 0 else "1.00×") if round(ratio, 2) == 1.0 else (
        f"{ratio:.2f}× {up}" if ratio > 1 else f"{1 / ratio:.2f}× {down}")
    interval = "" if spread == 0 else f" (95% CI {low:.2f}–{high:.2f})"
    why = {"regression": f"confirmed in {agreeing} of {batches} fresh process pairs",
           "improved": f"confirmed in {agreeing} of {batches} fresh process pairs",
           "unchanged": f"a {increase} of 10% or more is ruled out",
           "suspicious": f"beyond the threshold in {agreeing} of {batches} fresh process pairs; a failure needs 3 that agree"}
    more = (f"; deciding would take about {more_pairs} more process pairs, ~{12 * more_pairs} s of measuring beyond its "
            f"20 s budget (raise ab-budget: the input, the config key or --ab-budget)") if more_pairs else ""
    reason = (f"{change}: {what} {size}{interval}, {unit(baseline)} → {unit(candidate)}; {why[change]}; threshold 1.10×, "
              f"{rounds} rounds in {batches} process pair{'s' if batches != 1 else ''}{more}")
    return check(workload, aspect, outcome, device=device, metrics=metrics, reason=fields.pop("reason", reason),
                 duration_s=7.0, thresholds={"max_regression": 0.1, "alpha": 0.002}, **fields)


def _ms(value: float) -> str:
    return f"{value:.3g} ms"


def _mib(value: float) -> str:
    return f"{value / 2**20:,.4g} MiB"


def _cross(workload: str, *, device: str = "cpu", diff: float = 0.0, **fields: Any) -> CheckResult:
    """A candidate's cross-version result: its outputs against the baseline's, and both against the fp64 golden
    (per tensor, `ref_rmse` being the baseline's)."""
    metrics = {"baseline_torch": "2.12.0", "max_abs_diff_vs_baseline": diff, "mismatched_vs_baseline": 0,
               "bitwise_equal_to_baseline": diff == 0.0, **fields.pop("metrics", {})}
    return _numerics(workload, aspect="cross-version", device=device, metrics=metrics, **fields)


def _as_compare(reports: list[Report], baseline: str, candidate: str) -> list[Report]:
    """A comparison's reports with the rerun commands `compare` writes (commands/argv.compare_repro), not `run`'s."""
    head = f"torch-upgrade-check compare --baseline {baseline} --candidate {candidate} "
    return [dataclasses.replace(rep, results=[dataclasses.replace(r, repro=r.repro.replace("torch-upgrade-check run ", head))
                                              for r in rep.results]) for rep in reports]


def _comparison_clean() -> list[Report]:
    shared = [_numerics("mlp"), _numerics("resnet18"), check("mlp", "determinism", metrics={"bitwise_equal": True})]
    baseline = report(*shared, _latency("mlp", 0.085), _latency("resnet18", 12.4),
                      check("resnet18", "memory", metrics={"peak_bytes": 187_432_960, "memory_api": "profiler"}),
                      label="2.12.0", role="baseline", environment=BASE_ENV)
    candidate = report(
        *shared,
        _cross("mlp"), _cross("resnet18", diff=2.4e-7),
        _ab("mlp", "latency", "unchanged", 0.085, 1.01, p_value=0.62),
        _ab("resnet18", "latency", "unchanged", 12.4, 0.99, p_value=0.48),
        _ab("resnet18", "memory", "unchanged", 187_432_960, 1.0, spread=0.0, p_value=1.0),
        label="2.13.0", role="candidate", environment=CAND_ENV,
    )
    return _as_compare([baseline, candidate], "2.12.0", "2.13.0")


def _comparison_regression() -> list[Report]:
    """One confirmed latency regression, a memory regression, a suspicious and an improved latency, a cross-version
    failure with its first divergent module, a check only in the candidate and one only in the baseline, a baseline
    failure that does not decide, and torch, cuDNN, NCCL and Triton changed."""
    dev = {"device": "cuda"}

    def cuda(c: CheckResult) -> CheckResult:
        return dataclasses.replace(c, device="cuda", repro=c.repro.replace("--device cpu", "--device cuda"))

    shared = [cuda(_numerics("mlp")), cuda(_numerics("transformer_block"))]
    compile_ok = cuda(_numerics("transformer_block", aspect="compile", metrics={"compile_time_s": 12.0}))
    off = [tensor("output", 131_072, 1.0, 0.2, mismatched=912, rmse=0.05, ref_rmse=2.4e-8),
           *compile_ok.metrics["per_tensor"][1:]]
    compile_bad = dataclasses.replace(compile_ok, outcome=Outcome.FAILED,
                                      reason="1 of 3 tensors differ; worst output: rmse 0.05 > 2× eager's 2.4e-08; 912 of "
                                             "131072 elements outside atol·scale + rtol·|golden| (max abs err 0.2, scale 1)",
                                      metrics={**compile_ok.metrics, **closeness(off, max_rel_err=0.61)})
    baseline = report(
        *shared, compile_bad,
        *(cuda(_latency(w, ms)) for w, ms in (("resnet18", 10.0), ("transformer_block", 3.2), ("mlp", 0.1),
                                              ("cnn", 4.0), ("matmul", 0.5))),
        cuda(check("resnet18", "memory", metrics={"peak_bytes": 1_073_741_824, "memory_api": "cuda"})),
        cuda(check("transformer_block", "memory", metrics={"peak_bytes": 268_435_456, "memory_api": "cuda"})),
        device="cuda", label="2.12.0", role="baseline", environment=BASE_CUDA_ENV,
    )
    divergent = {"module": "layers.0.self_attn", "max_abs_err": 0.0123}
    drifted = [tensor("output", 131_072, 1.0, 0.0123, mismatched=5120, rmse=3.1e-3, ref_rmse=1.0e-4),
               tensor("grad:attn.in_proj_weight", 786_432, 0.0031, 6e-8, rmse=3e-10, ref_rmse=2.4e-10),
               tensor("grad:mlp.fc1.weight", 1_048_576, 0.0012, 6e-8, rmse=1.2e-10, ref_rmse=1e-10)]
    candidate = report(
        *shared, compile_ok,
        cuda(_numerics("flex_attention_alibi")),  # a new workload: only in the candidate
        _cross("mlp", **dev),
        _cross("transformer_block", **dev, diff=0.0123, outcome=Outcome.FAILED,
               reason="1 of 3 tensors differ; worst output: rmse 0.0031 > 2× the baseline's 0.0001; 5120 of 131072 "
                      "elements outside atol·scale + rtol·|golden| (max abs err 0.0123, scale 1)",
               metrics={"per_tensor": drifted, "mismatched_vs_baseline": 5120, "first_divergent_module": divergent}),
        _ab("resnet18", "latency", "regression", 10.0, 1.32, **dev, p_value=1.2e-6, spread=0.05),
        _ab("transformer_block", "latency", "suspicious", 3.2, 1.14, **dev, p_value=0.03, spread=0.12, agreeing=1,
            more_pairs=4),
        _ab("mlp", "latency", "improved", 0.1, 0.8, **dev, p_value=4e-5, spread=0.03),
        _ab("cnn", "latency", "unchanged", 4.0, 1.02, **dev),
        _ab("resnet18", "memory", "regression", 1_073_741_824, 1.25, **dev, p_value=0.0, spread=0.0),
        _ab("transformer_block", "memory", "unchanged", 268_435_456, 1.0, **dev, p_value=1.0, spread=0.0),
        device="cuda", label="2.13.0", role="candidate", environment=CAND_CUDA_ENV,
    )
    return _as_compare([baseline, candidate], "2.12.0", "2.13.0")


def _comparison_shared_failure() -> list[Report]:
    """resnet18's float32 numerics fails on both torches by about as much (a few gradient elements of a deep model,
    fp32 accumulation) and is judged by the real rule (analysis.shared): a warning, counted apart; mlp passes."""
    def failing(label: str, err: float, mismatched: int) -> CheckResult:
        tensors = [tensor("output", 8_000, 1.9, 1.1e-6, rmse=2e-7),
                   tensor("grad:conv1.weight", 9_408, 0.021, err, mismatched=mismatched, rmse=err / 40),
                   tensor("grad:fc.weight", 512_000, 0.004, 3e-9, rmse=1e-9)]
        return _numerics("resnet18", outcome=Outcome.FAILED, metrics={"per_tensor": tensors},
                         reason=f"1 of 3 tensors differ; worst grad:conv1.weight: {mismatched} of 9408 elements outside "
                                f"atol·scale + rtol·|golden| (max abs err {err:.3g}, scale 0.021)")
    both = [_numerics("mlp"), check("mlp", "determinism", metrics={"bitwise_equal": True})]
    baseline = report(*both, failing("2.12.0", 5.96e-7, 1), label="2.12.0", role="baseline", environment=BASE_ENV)
    candidate = report(*both, failing("2.13.0", 7.2e-7, 3), _cross("mlp"), label="2.13.0", role="candidate",
                       environment=CAND_ENV)
    return _as_compare([baseline, mark_preexisting(baseline, candidate)], "2.12.0", "2.13.0")


def _profile(wall: float, ops: dict[tuple[str, str], float], jitter: float) -> dict[str, Any]:
    """One side's profile of a round (worker.opprofile's shape): ms per forward call, per op at its inputs."""
    rows = [{"op": op, "shapes": json.loads(shapes), "dtypes": ["float32"] * len(json.loads(shapes)),
             "ms": round(ms * (1 + jitter), 6), "count": 1.0} for (op, shapes), ms in ops.items()]
    return {"calls": 97, "wall_ms": round(wall * (1 + jitter), 6), "time": "cpu", "ops": rows, "other_ms": 0.0}


def _comparison_attributed() -> list[Report]:
    """A latency regression attributed to one op (aten::topk at the team's shapes, as pytorch/pytorch#167462), an
    undecided one whose profiled forwards did not reproduce it, and op-latency naming the same op (suspicious) and
    passing elsewhere: the figures come from the real analysis (attribution, optiming) on hand-made inputs."""
    from torch_upgrade_check.analysis import attribution, optiming

    head = {("aten::addmm", "[[32000], [64, 1024], [1024, 32000]]"): 1.2, ("aten::softmax", "[[64, 32000]]"): 0.3,
            ("aten::topk", "[[64, 32000]]"): 0.42}
    slower = {**head, ("aten::topk", "[[64, 32000]]"): 0.63}
    jitters = (0.0, 0.01, -0.01, 0.02)
    table = attribution.attribute([_profile(2.05, head, j) for j in jitters],
                                  [_profile(2.27, slower, j) for j in jitters], slowdown_ms=2.05 * 0.11)
    table.update({"calls": 97, "seconds": 14.2, "budget_s": 60.0, "time": "cpu"})
    regressed = _ab("lm_head", "latency", "regression", 2.05, 1.11, p_value=2e-5, spread=0.01, batches=4)
    reason = regressed.reason.replace("2.28 ms; ", f"2.28 ms; {attribution.lead(table)}; ")
    regressed = dataclasses.replace(regressed, reason=reason, metrics={**regressed.metrics, "op_attribution": table})
    flat = attribution.attribute([_profile(3.2, {("aten::mm", "[[256, 512], [512, 512]]"): 2.9}, j) for j in jitters],
                                 [_profile(3.2, {("aten::mm", "[[256, 512], [512, 512]]"): 2.9}, -j) for j in jitters],
                                 slowdown_ms=3.2 * 0.12)
    flat.update({"calls": 62, "seconds": 19.5, "budget_s": 60.0, "time": "cpu"})
    undecided = _ab("transformer_block", "latency", "suspicious", 3.2, 1.12, p_value=0.04, spread=0.09, agreeing=1,
                    more_pairs=3)
    undecided = dataclasses.replace(undecided, metrics={**undecided.metrics, "change": "undecided", "op_attribution": flat},
                                    reason=undecided.reason.replace("suspicious:", "undecided:").replace(
                                        "3.58 ms; ", f"3.58 ms; {attribution.lead(flat)}; "))

    def op_latency(workload: str, ops: dict[str, tuple[str, float, float]]) -> CheckResult:
        timed = {key: {"op": op, "inputs": [key.partition("(")[2].rstrip(")")], "count": 2,
                       "pairs": [[(b * (1 + j), c * (1 - j)) for j in (0.0, 0.01, -0.01, 0.02, 0.0, -0.02, 0.01, 0.0)]
                                 for _ in range(2)]} for key, (op, b, c) in ops.items()}
        j = optiming.judge(timed)
        outcome = Outcome.SUSPICIOUS if j.state == "slower" else Outcome.PASSED
        return check(workload, "op-latency", outcome, reason=j.reason, details=j.details, duration_s=3.1,
                     metrics={"ops": j.rows, "slower_ops": [optiming.label(r) for r in j.flagged], "pairs": 2,
                              "rounds": 8}, thresholds={"op_latency_factor": optiming.FACTOR})

    ops = op_latency("lm_head", {"aten.topk.default(float32[64, 32000])": ("aten.topk.default", 0.41, 0.62),
                                 "aten.addmm.default(float32[64, 1024])": ("aten.addmm.default", 1.2, 1.21)})
    ops_ok = op_latency("transformer_block", {"aten.mm.default(float32[256, 512])": ("aten.mm.default", 2.9, 2.91)})
    baseline = report(_latency("lm_head", 2.05), _latency("transformer_block", 3.2),
                      check("lm_head", "op-latency", reason="the reference: 2 distinct ops of its recorded forward "
                                                             "and backward timed"),
                      check("transformer_block", "op-latency", reason="the reference: 1 distinct op timed"),
                      label="2.12.0", role="baseline", environment=BASE_ENV)
    candidate = report(regressed, undecided, ops, ops_ok, label="2.13.0", role="candidate", environment=CAND_ENV)
    return _as_compare([baseline, candidate], "2.12.0", "2.13.0")


def cases() -> dict[str, list[Report]]:
    """Every golden case: name -> the reports rendered together."""
    bf16 = [tensor("output", 8_000, 1.9, 0.029, mismatched=12, rmse=0.0061, floor_rmse=0.0042),
            tensor("grad:conv1.weight", 9_408, 0.021, 0.031, mismatched=4_200, rmse=0.0123, floor_rmse=0.00182),
            tensor("grad:fc.weight", 512_000, 0.004, 2.1e-5, rmse=8e-6, floor_rmse=9e-6)]
    failing_numerics = _numerics(
        "resnet18", dtype="bfloat16", outcome=Outcome.FAILED,
        reason="1 of 3 tensors differ; worst grad:conv1.weight: rmse 0.0123 > 4× bfloat16 rounding error 0.00182; "
               "4200 of 9408 elements outside atol·scale + rtol·|golden| (max abs err 0.031, scale 0.021)",
        details="top mismatches:\n  grad:conv1.weight(0, 3, 5, 1): got 1.031 expected 1.0\n"
                "  grad:conv1.weight(0, 1, 2, 2): got -0.52 expected -0.5",
        metrics={"per_tensor": bf16, "max_rel_err": 0.093,
                 "top_mismatches": [{"index": "grad:conv1.weight(0, 3, 5, 1)", "got": 1.031, "expected": 1.0,
                                     "abs_err": 0.031},
                                    {"index": "grad:conv1.weight(0, 1, 2, 2)", "got": -0.52, "expected": -0.5,
                                     "abs_err": 0.02}]},
    )
    nan_out = [tensor("output", 131_072, 1.0, math.inf, mismatched=3, nan=3, rmse=math.inf, ref_rmse=2.4e-8),
               tensor("grad:attn.in_proj_weight", 786_432, 0.0031, 6e-8, rmse=3e-10, ref_rmse=2.4e-10),
               tensor("grad:mlp.fc1.weight", 1_048_576, 0.0012, 6e-8, rmse=1.2e-10, ref_rmse=1e-10)]
    nan_compile = _numerics("transformer_block", aspect="compile", outcome=Outcome.FAILED,
                            reason="1 of 3 tensors differ; worst output: 3 NaN where the golden has numbers",
                            metrics={"per_tensor": nan_out, "max_rel_err": "nan", "compile_time_s": 31.0})
    slow = _latency("resnet18", 14.2, Outcome.FAILED, thresholds={"max_latency_ms": 12.0},
                    reason="median 14.2 ms (IQR 0.284 ms, 30 samples) > limit 12 ms")
    return {
        "all_passed": [report(*_healthy())],
        "correctness_failure": [report(*[{failing_numerics.id: failing_numerics, nan_compile.id: nan_compile}.get(c.id, c)
                                         for c in _healthy()])],
        "latency_failure": [report(*[c for c in _healthy() if c.id != slow.id], slow)],
        "crash_and_timeout": [_crash_and_timeout()],
        "skipped_device": [report(
            *(dataclasses.replace(c, device="mps", outcome=Outcome.SKIPPED, metrics={},
                                  reason="MPS not available: probe kernel failed: no Metal device") for c in _healthy()),
            device="mps", label="2.13.0", environment=MPS_ENV)],
        "fell_back_to_cpu": [report(*_healthy(), requested_device="cuda")],
        "nothing_ran": [report()],
        "infra_error": [report(infra_error="cannot import torch in .venv-2.13.0: ImportError: libcudart.so.12: "
                                           "cannot open shared object file\nTraceback (most recent call last):\n"
                                           '  File "<string>", line 1, in <module>')],
        "hostile_names": [_hostile()],
        "matrix": _matrix(),
        "comparison_clean": _comparison_clean(),
        "comparison_regression": _comparison_regression(),
        "comparison_attributed": _comparison_attributed(),
        "comparison_shared_failure": _comparison_shared_failure(),
    }


def oversized(n: int = 20_000) -> Report:
    """A run far over the summary budget: a failing check in every 40, the rest passing."""
    results = []
    for i in range(n):
        aspect = ("numerics", "latency", "memory", "determinism")[i % 4]
        failing = i % 40 == 0
        outcome = Outcome.FAILED if failing else Outcome.PASSED
        results.append(check(f"generated_workload_{i:05d}", aspect, outcome,
                             reason="max_abs_err above tolerance" if failing else "",
                             details="line\n" * 20 if failing else "",
                             metrics={"median_ms": i / 7, "max_abs_err": i * 1e-9, "peak_bytes": i * 4096}))
    return report(*results)


def render(reports: list[Report]) -> dict[str, str]:
    """The golden files' contents: summary, JUnit, annotations and outputs, after normalisation."""
    reports = [_normalised(r) for r in reports]
    return {
        "summary.md": render_summary(reports),
        "junit.xml": junit_to_string(build_junit(reports)),
        "annotations.txt": "".join(line + "\n" for line in annotations(reports)),
        "outputs.json": json.dumps(action_outputs(reports, PATHS), indent=2) + "\n",
    }


def _normalised(report: Report) -> Report:
    """Versions, times and hosts replaced, so the golden files only change when the rendering does."""
    environment = {k: ("<host>" if k == "hostname" else v) for k, v in report.environment.items()}
    return dataclasses.replace(report, tool_version="<tool-version>", started="<started>",
                               finished="<finished>" if report.finished else "", environment=environment)
