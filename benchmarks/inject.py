"""Interpreters that misbehave on purpose: a wrapper around a real Python whose sitecustomize slows
every top-level module call by a known factor, or perturbs nn.Linear's output by a known relative
amount. The detector benchmark and the compare tests use them as fake "candidates"."""

from __future__ import annotations

import stat
from pathlib import Path

SITECUSTOMIZE = '''
"""Injected by torch-upgrade-check's benchmarks: slow down or perturb torch on purpose."""
import os
import time

_slowdown = float(os.environ.get("TUC_INJECT_SLOWDOWN", "0") or 0)
_drift = float(os.environ.get("TUC_INJECT_DRIFT", "0") or 0)

if _slowdown or _drift:
    import torch

    if _slowdown:
        _call = torch.nn.Module.__call__
        _depth = [0]

        def _slow_call(self, *args, **kwargs):
            _depth[0] += 1
            start = time.perf_counter()
            try:
                return _call(self, *args, **kwargs)
            finally:
                _depth[0] -= 1
                if _depth[0] == 0:  # only the outermost module: the slowdown is exactly the factor
                    until = time.perf_counter() + (time.perf_counter() - start) * _slowdown
                    while time.perf_counter() < until:
                        pass

        torch.nn.Module.__call__ = _slow_call

    if _drift:
        _linear = torch.nn.functional.linear

        def _drifting_linear(input, weight, bias=None):
            out = _linear(input, weight, bias)
            # the fp64 golden stays exact: only the computation under test drifts
            return out if out.dtype == torch.float64 else out * (1 + _drift)

        torch.nn.functional.linear = _drifting_linear
'''


def injected_python(real_python: str, folder: Path, *, slowdown: float = 0.0, drift: float = 0.0) -> Path:
    """A `python` in `folder` that runs `real_python` with the injection active; returns its path."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "site").mkdir(exist_ok=True)
    (folder / "site" / "sitecustomize.py").write_text(SITECUSTOMIZE)
    wrapper = folder / "python"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'PYTHONPATH="{folder / "site"}${{PYTHONPATH:+:$PYTHONPATH}}"\n'
        f"TUC_INJECT_SLOWDOWN={slowdown}\nTUC_INJECT_DRIFT={drift}\n"
        "export PYTHONPATH TUC_INJECT_SLOWDOWN TUC_INJECT_DRIFT\n"
        f'exec "{real_python}" "$@"\n'
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return wrapper


__all__ = ["SITECUSTOMIZE", "injected_python"]
