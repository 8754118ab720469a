"""Interpreters for tests: a real Python with an emulated CUDA/MPS backend and/or a torch broken on purpose.

`interpreter(real, folder, emulate="mps", breaks=("sdpa-zero-grad",))` writes `folder/python`, a
wrapper that runs `real` with this folder's `site/` on PYTHONPATH; its sitecustomize turns on
`tuc_emulation` (TUC_EMULATE and its options) and the named breakages (`tuc_breakage`). The worker
then runs its real `--device cuda`/`--device mps` code, unchanged, on the CPU.
"""

from __future__ import annotations

import shlex
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path

SITE = Path(__file__).resolve().parent / "site"


def interpreter(real_python: str, folder: Path, *, emulate: str = "", breaks: Sequence[str] = (),
                options: Mapping[str, str] | None = None) -> Path:
    """A `python` in `folder` running `real_python` with the emulation and breakages asked for.

    options: TUC_EMULATE_* settings, e.g. {"TUC_EMULATE_CAPABILITY": "8.0", "TUC_EMULATE_KERNEL_US": "500"}.
    """
    folder.mkdir(parents=True, exist_ok=True)
    env = {"TUC_EMULATE": emulate, "TUC_BREAK": ",".join(breaks), **(options or {})}
    lines = ["#!/bin/sh", f'PYTHONPATH={shlex.quote(str(SITE))}"${{PYTHONPATH:+:$PYTHONPATH}}"', "export PYTHONPATH"]
    lines += [f"{k}={shlex.quote(v)}\nexport {k}" for k, v in env.items()]
    lines.append(f'exec {shlex.quote(real_python)} "$@"')
    wrapper = folder / "python"
    wrapper.write_text("\n".join(lines) + "\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return wrapper
