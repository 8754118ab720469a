"""The test harness's sitecustomize: turns on what TUC_EMULATE / TUC_BREAK ask for in this interpreter.

It is put on PYTHONPATH by tests/harness.interpreter(); it never runs in the product.

The emulation and the breakages are installed right after `torch` itself is imported, before the importer gets it
back, so every process that uses torch sees them as it would from the start. A process that never imports torch
is left alone and does not pay for importing it: the wrapper's environment reaches every child process, and
Inductor alone starts one Python per CPU-ISA probe (each only dlopens a library) every time a process compiles,
which cost each compiling test under the harness about ten imports of torch.
"""

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import types
from collections.abc import Sequence


def _install() -> None:
    if os.environ.get("TUC_EMULATE"):
        import tuc_emulation

        tuc_emulation.install()
    if os.environ.get("TUC_BREAK"):
        import tuc_breakage

        tuc_breakage.install(os.environ["TUC_BREAK"])


class _AfterTorch(importlib.abc.MetaPathFinder):
    """Finds `torch` as the rest of sys.meta_path does, and runs _install once torch's module has executed."""

    def find_spec(self, name: str, path: Sequence[str] | None = None,
                  target: types.ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if name != "torch":
            return None
        sys.meta_path.remove(self)  # once: the finders after it find torch, and no later import comes here
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        execute = spec.loader.exec_module

        def exec_module(module: types.ModuleType) -> None:
            execute(module)
            _install()

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


if os.environ.get("TUC_EMULATE") or os.environ.get("TUC_BREAK"):
    if "torch" in sys.modules:  # imported before this ran (by a .pth file): install now
        _install()
    else:
        sys.meta_path.insert(0, _AfterTorch())
