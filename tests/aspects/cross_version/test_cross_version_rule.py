"""The cross-version rule (aspects.cross_version.judge, through analysis.sides.decide_side as compare calls it): the
baseline's save passes once written; the candidate by the closeness rule against the baseline's golden, a changed
fp64 golden failing it too; a failure leads with the first aten op that changed (its repro after the check's own) and
ends with the first divergent module. Its breakages (gelu-every-dtype and the other ops changed in every dtype,
flex-masked-fails for a baseline) run in test_cross_version_breakage.py."""

from __future__ import annotations

from torch_upgrade_check.analysis.sides import decide_side
from torch_upgrade_check.model import CheckSpec, Observation, Outcome

SAVE = CheckSpec("mlp", "cross-version", "cpu", "float32", params={"mode": "save"})
JUDGE = CheckSpec("mlp", "cross-version", "cpu", "float32", params={"mode": "compare"})
OP = {"op": "aten.gelu.default", "module": "1", "index": 2, "of": 46, "inputs": ["float32[4, 16]"],
      "outputs": ["float32[4, 16]"], "output": "0", "max_abs_err": 1e-3, "repro": "python -c 'print(1)'"}


def metrics(rmse: float, **more: object) -> dict:
    t = {"name": "output", "numel": 10, "scale": 1.0, "max_abs_err": rmse, "mismatched": 3, "rmse": rmse, "nan": 0,
         "ref_rmse": 1e-7}
    fp64 = {"rtol": 1e-7, "atol": 1e-7, "tensors": 1, "mismatched_count": 0, "numel": 10, "max_abs_err": 0.0}
    return {"per_tensor": [t], "tensors": 1, "max_abs_err": rmse, "rtol": 1.3e-6, "atol": 1e-5,
            "fp64_vs_baseline": fp64, **more}


def test_the_baselines_save_passes_once_written() -> None:
    r = decide_side(SAVE, Observation(SAVE.id, "ok", {"saved": "/x.pt", "tensors": 7}, duration_s=0.1234567891),
                    "repro", {})
    assert (r.outcome, r.reason, r.duration_s, r.repro) == (Outcome.PASSED, "outputs saved for the candidate (7 tensors)",
                                                            0.1234567891, "repro")


def test_a_failure_leads_with_the_first_changed_op_and_ends_with_the_first_divergent_module() -> None:
    found = metrics(1e-5, first_divergent_module={"module": "1", "max_abs_err": 2e-3}, first_divergent_op=OP)
    r = decide_side(JUDGE, Observation(JUDGE.id, "ok", found), "tuc run", {})
    assert r.outcome is Outcome.FAILED
    assert r.reason.startswith("first aten op that changed: aten.gelu.default in 1 (op 3 of 46; inputs "
                               "float32[4, 16] -> float32[4, 16]): output 0 off by max abs err 0.001; 1 of 1 tensors "
                               "differ"), r.reason
    assert r.reason.endswith("; first divergent module: 1 (max abs err 0.002)"), r.reason
    assert r.repro == ("tuc run\n# the first aten op that changed, alone (in the report folder, with the baseline's "
                       "inputs):\npython -c 'print(1)'")
    passed = decide_side(JUDGE, Observation(JUDGE.id, "ok", {**found, **metrics(1e-7)}), "tuc run", {})
    assert passed.outcome is Outcome.PASSED and passed.repro == "tuc run" and "first" not in passed.reason


def test_a_changed_fp64_golden_fails_a_check_whose_outputs_pass() -> None:
    changed = metrics(1e-7)
    changed["fp64_vs_baseline"] = {**changed["fp64_vs_baseline"], "mismatched_count": 4, "worst": "output"}
    r = decide_side(JUDGE, Observation(JUDGE.id, "ok", changed), "", {})
    assert r.outcome is Outcome.FAILED and r.reason.startswith("the fp64 golden itself changed: 4 of 10 elements"), r.reason
