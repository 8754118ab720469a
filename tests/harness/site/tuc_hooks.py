"""Run a patch once a module is imported, not before (the harness's breakages patch torch where torch itself
imports what they patch)."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from types import ModuleType


def once_imported(name: str, patch: Callable[[ModuleType], None]) -> None:
    """patch(module) as soon as `name` is imported (now if it already is), by whoever imports it first."""
    if name in sys.modules:
        patch(sys.modules[name])
        return

    class Hook:
        def find_spec(self, fullname, path, target=None):
            if fullname != name:
                return None
            sys.meta_path.remove(self)
            spec = importlib.util.find_spec(fullname)
            if spec is None or spec.loader is None:
                return spec
            run = spec.loader.exec_module

            def exec_module(module: ModuleType) -> None:
                run(module)
                patch(module)

            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, Hook())
