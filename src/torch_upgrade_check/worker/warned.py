"""Every Python warning raised while a workload's checks run in this worker, recorded per workload and dtype.

The 2.4 FutureWarning announced the 2.6 `torch.load` break: a warning new in the candidate is often the
next upgrade's failure. Each warning is kept as (category, normalised message, emitting module) with a
count and the aspects that raised it. Messages and modules are normalised so that two venvs of the same
torch record the same thing: absolute paths lose their prefix up to site-packages, addresses become 0x….
A warning torch raises once per process is recorded under the first check that raised it, in plan order,
the same on both sides of a compare.
"""

from __future__ import annotations

import functools
import os
import re
import sys
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from torch_upgrade_check.model import CheckSpec

MAX_MESSAGE = 300  # characters kept of a warning's first line
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{4,}")
_PATH = re.compile(r"(?:[A-Za-z]:)?[\\/][^\s'\"():,]*?[\\/](?:site|dist)-packages[\\/]")
_logs: dict[tuple[str, str], list[tuple[str, list[warnings.WarningMessage]]]] = {}


@contextmanager
def capture(spec: CheckSpec) -> Iterator[None]:
    """Record every warning raised inside, for `spec`'s workload and dtype; filters set inside still apply."""
    with warnings.catch_warnings(record=True) as log:
        warnings.simplefilter("always")
        _logs.setdefault((spec.workload, spec.dtype), []).append((spec.aspect, log))
        yield


# torch's warning when an op MPS lacks runs on the CPU (aten/src/ATen/mps/MPSFallback.mm, TORCH_WARN_ONCE)
_FALLBACK = re.compile(r"The operator '([\w:.]+)' is not currently supported on the MPS backend and will fall back "
                       r"to run on the CPU")


@contextmanager
def mps_fallback(spec: CheckSpec) -> Iterator[dict[str, Any]]:
    """With PYTORCH_ENABLE_MPS_FALLBACK=1 on MPS: yields a dict that, after the block, holds the ops torch ran on
    the CPU inside it (`mps_cpu_fallback_ops`), read from torch's fallback warnings; warn-always is on inside, so
    an op that fell back in an earlier check is named again. Elsewhere it yields an empty dict."""
    found: dict[str, Any] = {}
    if spec.device != "mps" or os.environ.get("PYTORCH_ENABLE_MPS_FALLBACK") != "1":
        yield found
        return
    import torch

    before = torch.is_warn_always_enabled()
    torch.set_warn_always(True)
    log: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as log:
            warnings.simplefilter("always")
            yield found
    finally:  # a check that raised keeps its fallback ops and its warnings too
        torch.set_warn_always(before)
        found["mps_cpu_fallback_ops"] = sorted({m.group(1) for w in log if (m := _FALLBACK.search(str(w.message)))})
        for w in log:  # the warnings check still sees every warning raised here
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)


def seen(spec: CheckSpec) -> list[dict[str, Any]]:
    """The distinct warnings recorded so far for `spec`'s workload and dtype, most frequent first."""
    return tally((w.category.__name__, normalise(str(w.message)), module_of(w.filename), aspect)
                 for aspect, log in _logs.get((spec.workload, spec.dtype), []) for w in log)


def tally(raised: Iterable[tuple[str, str, str, str]], most: int | None = None) -> list[dict[str, Any]]:
    """(category, normalised message, module, where) for each warning raised -> the distinct warnings, most frequent
    first, each with its count and where it was raised (`aspects`: the aspects, or the tests; at most `most`)."""
    found: dict[tuple[str, str, str], dict[str, Any]] = {}
    for category, message, module, where in raised:
        entry = found.setdefault((category, message, module), {"category": category, "message": message,
                                                               "module": module, "count": 0, "aspects": []})
        entry["count"] += 1
        if where not in entry["aspects"] and (most is None or len(entry["aspects"]) < most):
            entry["aspects"].append(where)
    return sorted(found.values(), key=lambda e: (-e["count"], e["category"], e["module"], e["message"]))


def normalise(message: str) -> str:
    """The first line, paths from their site-packages on, addresses blanked: equal across venvs and runs."""
    first = message.strip().splitlines()[0] if message.strip() else ""
    first = _ADDRESS.sub("0x…", _PATH.sub("", first))
    return first if len(first) <= MAX_MESSAGE else first[:MAX_MESSAGE - 1] + "…"


@functools.lru_cache(maxsize=512)
def module_of(filename: str) -> str:
    """The module that raised it, as Python's stacklevel names it (torch's deprecations often name their caller):
    `torch.nn.modules.linear` for .../site-packages/torch/nn/modules/linear.py, an imported module's own name
    (user code on python-path), else the file's name."""
    path = os.path.abspath(filename)
    for name, module in list(sys.modules.items()):
        if getattr(module, "__file__", None) and os.path.abspath(module.__file__) == path:
            return name
    parts = re.split(r"[\\/](?:site|dist)-packages[\\/]", path)
    if len(parts) > 1:
        return os.path.splitext(parts[-1])[0].replace("/", ".").replace("\\", ".").removesuffix(".__init__")
    return os.path.basename(filename)
