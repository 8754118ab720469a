"""What one check leaves in its worker process that the next must not inherit: Dynamo's compiled code.

Dynamo keeps, per code object, what it compiled and how it failed (its code caches), for the life of the
process. Code that every check shares, such as FlexAttention's own eager wrapper (eager FlexAttention is
`torch.compile(..., fullgraph=True)` of one function in torch), keeps those entries from one check to the next.
Seen on torch 2.13.0: cross-version's op recording of a FlexAttention workload runs it under a TorchDispatchMode,
which the FlexAttention operator rejects; what Dynamo cached on the way made every later FlexAttention call with a
mask in that worker fail to compile ("Attempted to call function marked as skipped": `torch._safe_softmax`),
while the same check alone passed. So each check of a plan starts from `torch._dynamo.reset()`, as a fresh
process would. Not in compare's A/B rounds: their instances keep compiled models from round to round on purpose.
"""

from __future__ import annotations

import sys


def forget_compiled() -> None:
    """Clear Dynamo's in-memory compile caches, where this process has imported Dynamo (else nothing was compiled,
    and importing it would cost seconds). Inductor's on-disk caches are left alone: they are keyed by the graph."""
    dynamo = sys.modules.get("torch._dynamo")
    if dynamo is not None:
        dynamo.reset()
