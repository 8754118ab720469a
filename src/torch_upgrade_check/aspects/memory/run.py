"""Peak memory of one forward (and backward, with a loss), with the backend's own counter, and the host RAM's
growth meanwhile."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch_upgrade_check.model import CheckSpec
from torch_upgrade_check.worker import devices
from torch_upgrade_check.worker.instance import Instance, forward_backward

# its instance is built alone on a device with a live counter (worker.checks): the peak counts from the bytes
# allocated just before it was built, so what earlier checks left there does not count
BUILT_ALONE = True


def run(spec: CheckSpec, factory: Callable[..., Any], inst: Instance, device: devices.Device) -> dict[str, Any]:
    """Peak memory of one forward (and backward, with a loss), measured with the backend's own counter, and how
    far the process's host RAM (resident set) rose meanwhile: CPU offload and host-side copies show there. On
    CUDA and MPS the peak counts what the workload holds on the device before the call too (`resident_bytes`:
    weights, inputs, buffers torch keeps for it): a card must hold all of it."""
    with devices.HostPeak() as host, device.peak_memory(since=inst.allocated_before) as peak:
        forward_backward(inst)
    resident = {"resident_bytes": peak.resident} if peak.resident is not None else {}
    return {"peak_bytes": peak.bytes, "memory_api": peak.api, **resident, "host_peak_bytes": host.bytes,
            "host_memory_api": host.api}
