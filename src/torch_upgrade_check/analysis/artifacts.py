"""The deployment-artifact aspects' rule (export, jit): built, saved, loaded in a fresh process, and every
program's outputs within the compile rule of eager's (pure).

A program that could not be built (the export or script raised), saved, loaded or run fails with torch's first
line; in `compare` the candidate also loads and runs the program the baseline saved, and a workload that built
on the baseline and no longer builds on the candidate fails saying so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch_upgrade_check.analysis import closeness
from torch_upgrade_check.model import Outcome

WHAT = {"export": "torch.export", "jit": "TorchScript", "aoti": "AOTInductor"}


def judge(m: Mapping[str, Any], aspect: str, dtype: str) -> tuple[Outcome, str, dict[str, Any]]:
    what = f"{WHAT.get(aspect, aspect)} ({m.get('how')})" if aspect == "jit" else WHAT.get(aspect, aspect)
    baseline = f"baseline {m.get('baseline_torch')}" if m.get("mode") == "compare" else ""
    if not m.get("built"):
        was = f"; it built on {baseline}" if baseline and m.get("baseline_built") else ""
        return Outcome.FAILED, f"the {what} program cannot be built: {m.get('build_error')}{was}", {}
    if m.get("save_error"):
        return Outcome.FAILED, f"the {what} program was built but cannot be saved: {m['save_error']}", {}
    errors = dict(m.get("load_errors") or {})
    if errors:
        shown = "; ".join(f"{name}: {why}" for name, why in sorted(errors.items()))
        whose = f" (saved by {baseline})" if "baseline's program" in errors else ""
        return Outcome.FAILED, f"the saved {what} program does not load and run in a fresh process{whose}: {shown}", {}
    outcome, reason, thresholds = closeness.judge(m, aspect, dtype)
    programs = list(m.get("programs") or [])
    ran = "built, run, saved and reloaded in a fresh process"
    if "baseline's program" in programs:
        ran += f"; {baseline}'s saved program loaded and run"
    elif baseline:
        ran += f" ({baseline} built no program to load)" if not m.get("baseline_built") else ""
    return outcome, f"{what}: {ran}; {reason}", thresholds
