"""Interpreters that misbehave on purpose, for the detector benchmark and the compare tests: a wrapper
around a real Python whose sitecustomize slows every top-level module call by a known factor, puts a
process now and then in a slow state (a bimodal machine: with probability `slow_state` a process is
`slow_factor` slower as a whole), or perturbs nn.Linear's output by a known relative amount. (A slower
Inductor compile is the tests' own `compile-slower` breakage, tests/harness/site/tuc_breakage.py.)

Both sides of a benchmark comparison are wrapped (the baseline with factor 0): the wrapper's own
overhead is then the same on both sides, and only the injected factor differs.
"""

from __future__ import annotations

import stat
from pathlib import Path

SITECUSTOMIZE = '''
"""Injected by torch-upgrade-check's benchmarks: slow down or perturb torch on purpose."""
import os
import random
import time

if os.environ.get("TUC_INJECT") == "1":
    import torch

    _slowdown = float(os.environ.get("TUC_INJECT_SLOWDOWN", "0") or 0)
    _drift = float(os.environ.get("TUC_INJECT_DRIFT", "0") or 0)
    # a process in the slow state is slower as a whole, for its whole life (drawn once, at start)
    if random.SystemRandom().random() < float(os.environ.get("TUC_INJECT_SLOW_STATE", "0") or 0):
        _slowdown = (1 + _slowdown) * (1 + float(os.environ.get("TUC_INJECT_SLOW_FACTOR", "0.12") or 0)) - 1
    _call = torch.nn.Module.__call__
    _depth = [0]

    def _slow_call(self, *args, **kwargs):
        # the same code on every side: with factor 0 it costs what it costs with any other factor
        start = time.perf_counter()
        _depth[0] += 1
        try:
            return _call(self, *args, **kwargs)
        finally:
            _depth[0] -= 1
            if _depth[0] == 0:  # only the outermost module: the slowdown is the factor of the whole call
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


def injected_python(real_python: str, folder: Path, *, slowdown: float = 0.0, drift: float = 0.0,
                    slow_state: float = 0.0, slow_factor: float = 0.12) -> Path:
    """A `python` in `folder` that runs `real_python` with the injection active (factor 0: the wrapper alone)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "site").mkdir(exist_ok=True)
    (folder / "site" / "sitecustomize.py").write_text(SITECUSTOMIZE)
    wrapper = folder / "python"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'PYTHONPATH="{folder / "site"}${{PYTHONPATH:+:$PYTHONPATH}}"\n'
        f"TUC_INJECT=1\nTUC_INJECT_SLOWDOWN={slowdown}\nTUC_INJECT_DRIFT={drift}\n"
        f"TUC_INJECT_SLOW_STATE={slow_state}\nTUC_INJECT_SLOW_FACTOR={slow_factor}\n"
        "export PYTHONPATH TUC_INJECT TUC_INJECT_SLOWDOWN TUC_INJECT_DRIFT TUC_INJECT_SLOW_STATE TUC_INJECT_SLOW_FACTOR\n"
        f'exec "{real_python}" "$@"\n'
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return wrapper


__all__ = ["SITECUSTOMIZE", "injected_python"]
