"""The compile-time rule (aspects.compile_time.judge, through verdicts.decide): the cold compiles' median; none
timed fails."""

from __future__ import annotations

from torch_upgrade_check.analysis.verdicts import decide
from torch_upgrade_check.model import CheckSpec, Observation, Outcome


def test_the_cold_compiles_median_is_recorded_and_none_timed_fails() -> None:
    spec = CheckSpec("matmul", "compile-time", "cpu", "float32")
    r = decide(spec, Observation(spec.id, "ok", metrics={"samples_ms": [300.0, 100.0, 200.0]}))
    assert r.outcome is Outcome.PASSED and r.metrics["median_ms"] == 200.0
    assert r.reason == "cold compile median 200 ms (3 compiles, a fresh Inductor cache each)"
    none = decide(spec, Observation(spec.id, "ok", metrics={"samples_ms": []}))
    assert none.outcome is Outcome.FAILED and none.reason == "no compile was timed"
