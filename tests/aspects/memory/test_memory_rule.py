"""The memory rule (aspects.memory.judge, through verdicts.decide): recorded, with the counter and host RAM named."""

from __future__ import annotations

from torch_upgrade_check.analysis.verdicts import decide
from torch_upgrade_check.model import CheckSpec, Observation, Outcome


def test_a_measured_peak_passes_and_names_its_counter_and_the_host_rams_growth() -> None:
    spec = CheckSpec("mlp", "memory", "cpu", "float32")
    r = decide(spec, Observation(spec.id, "ok", metrics={"peak_bytes": 3 * 2**20, "memory_api": "profiler",
                                                          "host_peak_bytes": 2**20, "host_memory_api": "rss"}))
    assert r.outcome is Outcome.PASSED
    assert r.reason == "peak 3.0 MiB (profiler); host RAM +1.0 MiB (peak resident set growth)"
    bare = decide(spec, Observation(spec.id, "ok", metrics={}))
    assert bare.reason == "peak 0 B (?)"
