"""The latency rule (aspects.latency.judge, through verdicts.decide): the median of the samples, held to a
--max-latency-ms limit where one names the workload; compiled-latency's is the same rule, its compile named."""

from __future__ import annotations

from torch_upgrade_check.analysis.verdicts import decide
from torch_upgrade_check.model import CheckSpec, Observation, Outcome


def latency(samples: list[float], aspect: str = "latency", **metrics: object) -> tuple[CheckSpec, Observation]:
    spec = CheckSpec("mlp", aspect, "cpu", "float32")
    return spec, Observation(spec.id, "ok", metrics={"samples_ms": samples, "inner_loops": 4, **metrics})


def test_the_median_passes_under_its_limit_and_fails_over_it() -> None:
    spec, obs = latency([1.0, 2.0, 3.0])
    alone = decide(spec, obs)
    assert alone.outcome is Outcome.PASSED and alone.thresholds == {}
    assert alone.metrics["median_ms"] == 2.0 and list(alone.metrics)[-2:] == ["median_ms", "iqr_ms"]
    under = decide(spec, obs, max_latency_ms={"mlp": 2.5})
    assert under.outcome is Outcome.PASSED and "≤ limit 2.5 ms" in under.reason
    over = decide(spec, obs, max_latency_ms={"ml*": 1.5})
    assert over.outcome is Outcome.FAILED and "> limit 1.5 ms" in over.reason
    assert over.thresholds == {"max_latency_ms": 1.5}


def test_no_samples_fail_never_pass_as_fast() -> None:
    r = decide(*latency([]), max_latency_ms={"mlp": 10.0})
    assert r.outcome is Outcome.FAILED and r.reason == "no latency samples were taken"


def test_compiled_latency_is_latencys_rule_and_names_the_compile_it_left_out() -> None:
    spec, obs = latency([1.0, 1.0, 1.0], "compiled-latency", compile_s=2.5)
    r = decide(spec, obs, max_latency_ms={"mlp": 0.5})
    assert r.outcome is Outcome.FAILED and r.reason.endswith("; compiled in 2.5 s (not timed)")
