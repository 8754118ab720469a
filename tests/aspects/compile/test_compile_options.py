"""The torch.compile arguments each compile check compiles with (worker.compiling.options): the workload's `compile:`
as given, but for compile-mode (its row's device_mode) the device's mode in place of the workload's mode and Inductor
options. The A/A and the broken torches that run these are in test_compile_breakage.py."""

from __future__ import annotations

import pytest
from conftest import requires_torch

from torch_upgrade_check.model import CheckSpec

pytestmark = requires_torch
GIVEN = {"mode": "default", "dynamic": True, "options": {"max_autotune": True}}


def _options(aspect: str, device: str) -> dict[str, object]:
    from torch_upgrade_check.worker import compiling

    return compiling.options(CheckSpec("dyn", aspect, device, "float32", params={"compile": GIVEN}))


@pytest.mark.parametrize(("device", "mode"), [("cpu", "max-autotune-no-cudagraphs"), ("cuda", "reduce-overhead"),
                                              ("mps", "max-autotune-no-cudagraphs")])
def test_compile_mode_compiles_in_the_devices_mode_in_place_of_the_workloads(device: str, mode: str) -> None:
    assert _options("compile-mode", device) == {"mode": mode, "dynamic": True}


@pytest.mark.parametrize("aspect", ["compile", "compile-cache", "compiled-latency", "compile-time"])
def test_the_other_compile_checks_compile_as_the_workload_says(aspect: str) -> None:
    assert _options(aspect, "cuda") == GIVEN


def test_no_compile_options_are_torch_compiles_defaults_and_compile_modes_mode() -> None:
    from torch_upgrade_check.worker import compiling

    assert compiling.options(CheckSpec("mlp", "compile", "cpu", "float32")) == {}
    assert compiling.options(CheckSpec("mlp", "compile-mode", "cpu", "float32")) == {"mode": "max-autotune-no-cudagraphs"}
