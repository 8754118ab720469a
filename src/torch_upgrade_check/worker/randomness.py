"""Random-stream fingerprints: which seeded random ops a workload's training draws from (initialisers, `randn`,
dropout, `multinomial`), in order, and a hash of what each one drew.

A release can change the numbers a seed gives (torch 2.7 changed `torch.multinomial`'s samples,
pytorch/pytorch#154031): every number is still right, and a training run from the same seed diverges. Both sides
of `compare` record the fingerprint; where they differ, the failure says the random stream changed, and in which
op, instead of blaming numerics. Ops are those torch tags `nondeterministic_seeded`; the first MAX_CALLS are kept.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._pytree import tree_flatten

from torch_upgrade_check.worker import tensors

MAX_CALLS = 256


def fingerprint(run: Callable[[], Any]) -> list[dict[str, Any]]:
    """Run `run()` recording each seeded random op: its name, the shapes it drew and a hash of the numbers."""
    from torch.utils._python_dispatch import TorchDispatchMode

    calls: list[dict[str, Any]] = []

    class Fingerprint(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seeded = len(calls) < MAX_CALLS and torch.Tag.nondeterministic_seeded in func.tags
            if seeded:
                given = _hash(_values_used(func, args, kwargs or {}))  # before the op: in place, it overwrites them
            out = func(*args, **(kwargs or {}))
            if seeded:
                drawn = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
                calls.append({"op": str(func), "shapes": [list(t.shape) for t in drawn], "sha256": _hash(drawn),
                              "inputs_sha256": given})
            return out

    with Fingerprint():
        run()
    return calls


def _values_used(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[torch.Tensor]:
    """The tensors whose values the op's draw depends on (dropout's input, multinomial's probabilities): not the
    tensor an in-place fill (`uniform_`, `normal_`) overwrites, nor a `*_like` op's template, which give shape only."""
    name = func._schema.name.split("::")[-1]
    skip_first = name.endswith("_") or name.endswith("_like")
    leaves = tree_flatten((args[1:] if skip_first else args, kwargs))[0]
    return [t for t in leaves if isinstance(t, torch.Tensor)]


def _hash(values: list[torch.Tensor]) -> str:
    digest = hashlib.sha256()
    for t in values:
        digest.update(f"{t.dtype}{list(t.shape)}".encode())
        digest.update(_bytes(t))
    return digest.hexdigest()[:16]


HASHED_BYTES = 1 << 16  # of each draw: a changed stream shows in its first numbers, and big initialisers stay cheap


def _bytes(t: torch.Tensor) -> bytes:
    """The first HASHED_BYTES of the tensor's raw bytes, on the host, without NumPy (it may be absent)."""
    flat = tensors.host(t).contiguous().reshape(-1)
    if flat.dtype == torch.bool:
        flat = flat.to(torch.uint8)
    return bytes(flat.view(torch.uint8)[:HASHED_BYTES].tolist()) if flat.numel() else b""


def first_change(theirs: list[dict[str, Any]], mine: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Where this torch's random stream first leaves the baseline's: the op, which call, and how; None if the same
    as far as it can be told: a draw whose inputs differ (dropout of different activations, multinomial of other
    probabilities) differs for its inputs' sake, and nothing from there on is the stream's alone. A side that
    recorded nothing (its fingerprint failed) tells nothing."""
    if not theirs or not mine:
        return None
    for index, (a, b) in enumerate(zip(theirs, mine)):
        if a["op"] == b["op"] and a.get("inputs_sha256") != b.get("inputs_sha256"):
            return None
        if a["op"] != b["op"] or a["shapes"] != b["shapes"]:
            return {"op": b["op"], "call": index + 1, "of": len(theirs),
                    "how": f"the random ops called changed: the baseline drew {a['op']} {a['shapes']}, this torch "
                           f"{b['op']} {b['shapes']}"}
        if a["sha256"] != b["sha256"]:
            return {"op": a["op"], "call": index + 1, "of": len(theirs),
                    "how": f"{a['op']} draws different numbers for the same seed"}
    if len(theirs) != len(mine):
        return {"op": "", "call": min(len(theirs), len(mine)) + 1, "of": len(theirs),
                "how": f"the baseline drew {len(theirs)} times, this torch {len(mine)}"}
    return None
