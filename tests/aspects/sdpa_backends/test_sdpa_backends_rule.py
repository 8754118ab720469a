"""The sdpa-backends rule (aspects.sdpa_backends.judge, through verdicts.decide and compare's judge_against_baseline):
each backend on each case by the numerics rule, a wrong one failing named with its case; in compare a default
backend that changed since the baseline is said, never failed. Its breakages (sdpa-flash-odd-lengths,
sdpa-default-math) run in test_sdpa_backends_breakage.py."""

from __future__ import annotations

from dataclasses import replace

from torch_upgrade_check.analysis.sides import judge_against_baseline
from torch_upgrade_check.analysis.verdicts import decide
from torch_upgrade_check.model import CheckSpec, Observation, Outcome, Report, Side

SPEC = CheckSpec("sdpa", "sdpa-backends", "cpu", "float32")


def case(mismatched: int = 0) -> dict:
    t = {"name": "output", "numel": 10, "scale": 1.0, "max_abs_err": 1e-8, "mismatched": mismatched,
         "rmse": 1e-2 if mismatched else 1e-8, "nan": 0}
    return {"per_tensor": [t], "tensors": 1, "max_abs_err": 1e-8, "mismatched_count": mismatched}


def metrics(wrong: int = 0, default: str = "FLASH_ATTENTION") -> dict:
    return {"cases": {"causal": {}, "tiled": {}},
            "checked": {"MATH/causal": case(), "FLASH_ATTENTION/causal": case(wrong), "MATH/tiled": case()},
            "not_offered": {"FLASH_ATTENTION/tiled": "no", "CUDNN_ATTENTION/causal": "no"},
            "default_backend": {"causal": default, "tiled": "MATH"}, "rtol": 1.3e-6, "atol": 1e-5}


def test_every_backend_within_tolerance_passes_and_a_wrong_one_fails_named() -> None:
    r = decide(SPEC, Observation(SPEC.id, "ok", metrics()))
    assert (r.outcome, r.reason) == (Outcome.PASSED, (
        "FLASH_ATTENTION, MATH within tolerance on 2 cases, forward and backward; not offered here: CUDNN_ATTENTION; "
        "not for every case: FLASH_ATTENTION; the default picks causal: FLASH_ATTENTION, tiled: MATH"))
    wrong = decide(SPEC, Observation(SPEC.id, "ok", metrics(wrong=4)))
    assert wrong.outcome is Outcome.FAILED
    assert wrong.reason.startswith("1 of 3 backend cases differ from the fp64 golden; first: FLASH_ATTENTION/causal: ")
    assert decide(SPEC, Observation(SPEC.id, "ok", {"checked": {}})).reason == "no SDPA backend ran"


def test_a_default_backend_changed_since_the_baseline_is_said_not_failed() -> None:
    def report(role: Side, label: str, default: str) -> Report:
        result = decide(SPEC, Observation(SPEC.id, "ok", metrics(default=default)))
        return Report("1", "cpu", "cpu", label, [], "now", results=(result,), role=role)

    base, cand = report(Side.BASELINE, "2.12", "FLASH_ATTENTION"), report(Side.CANDIDATE, "2.13", "MATH")
    judged = judge_against_baseline(base, cand, ()).results[0]
    assert judged.outcome is Outcome.PASSED
    assert judged.reason.endswith("; the default backend changed since baseline 2.12: causal: FLASH_ATTENTION → MATH")
    assert judged.metrics["default_backend_changed"] == {"causal": ["FLASH_ATTENTION", "MATH"]}
    same = replace(cand, results=(replace(cand.results[0], metrics=base.results[0].metrics),))
    assert judge_against_baseline(base, same, ()).results[0] == same.results[0]
