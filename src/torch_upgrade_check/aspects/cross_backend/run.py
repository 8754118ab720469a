"""Cross-backend: the workload's forward and backward on the accelerator under test against its fp64 golden, with
the same computation on the CPU (its weights and inputs, the dtype under test) as the reference: an accelerator's
kernel may differ from the CPU's by rounding, not by more (analysis.closeness)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch_upgrade_check.model import CheckSpec
from torch_upgrade_check.worker import devices, tensors
from torch_upgrade_check.worker.devices import DTYPES
from torch_upgrade_check.worker.instance import (
    Instance,
    Skip,
    build,
    copy_to,
    forward_backward,
    golden,
    not_checked,
    tolerances,
)


def run(spec: CheckSpec, factory: Callable[..., Any], inst: Instance, device: devices.Device) -> dict[str, Any]:
    if device.name == "cpu":
        raise Skip("cross-backend compares an accelerator with the CPU; the device under test is the CPU")
    rtol, atol = tolerances(spec, inst)
    cpu = build(factory, "cpu", DTYPES[spec.dtype])
    copy_to(inst, cpu, DTYPES[spec.dtype])
    with devices.get("cpu").precision(spec.dtype):
        reference = forward_backward(cpu)
    metrics = tensors.compare(forward_backward(inst), golden(factory, inst), reference=reference, rtol=rtol,
                              atol=atol, dtype=spec.dtype)
    no_ref = {}
    if "gradients" in cpu.skip and inst.loss is not None:
        no_ref["gradients"] = f"judged against the fp64 golden alone: the CPU has none to compare ({cpu.skip['gradients']})"
    return {**metrics, "rtol": rtol, "atol": atol, "not_checked": not_checked(inst), "no_reference": no_ref}
