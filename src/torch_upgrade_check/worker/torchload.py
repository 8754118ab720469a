"""A file read as training scripts and the checkpoint and artifact aspects read it: torch.load with this torch's
defaults, onto the CPU; where it refuses, why and the fix."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import torch

_GLOBAL = re.compile(r"GLOBAL ([A-Za-z_][\w.]*)")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def load(path: Path) -> tuple[Any, dict[str, Any]]:
    """The file read by the default `torch.load` (this torch's `weights_only` default) onto the CPU, as training
    scripts load before `load_state_dict` copies onto the device; or None, with why and the fix."""
    try:
        return torch.load(path, map_location="cpu"), {"loaded": True}
    except Exception as e:
        text = _ANSI.sub("", str(e))
        names = sorted(set(_GLOBAL.findall(text)))
        fix = (f"call torch.serialization.add_safe_globals([{', '.join(names)}]) before torch.load (or load a file "
               f"you trust with weights_only=False)" if names else "")
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        first = next((line for line in lines if "Unsupported global" in line or "Unpickler error" in line),
                     lines[0] if lines else "")
        return None, {"loaded": False, "load_error": f"{type(e).__name__}: {first}"[:400], "unsafe_globals": names,
                      "fix": fix}
