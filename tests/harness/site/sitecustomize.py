"""The test harness's sitecustomize: turns on what TUC_EMULATE / TUC_BREAK ask for in this interpreter.

It is put on PYTHONPATH by tests/harness.interpreter(); it never runs in the product.

TUC_EMULATE_CUDAGRAPHS=1 adds CUDA graphs' reuse of output memory (tuc_cudagraphs) on the CPU, with or without
TUC_EMULATE. The emulation and the breakages are installed right after `torch` itself is imported, before the importer gets it
back, so every process that uses torch sees them as it would from the start. A process that never imports torch
is left alone and does not pay for importing it: the wrapper's environment reaches every child process, and
Inductor alone starts one Python per CPU-ISA probe (each only dlopens a library) every time a process compiles,
which cost each compiling test under the harness about ten imports of torch.
"""

import os

import tuc_hooks


def _install(_torch: object) -> None:
    if os.environ.get("TUC_EMULATE"):
        import tuc_emulation

        tuc_emulation.install()
    if os.environ.get("TUC_EMULATE_CUDAGRAPHS") == "1":
        import tuc_cudagraphs

        tuc_cudagraphs.install()
    if os.environ.get("TUC_BREAK"):
        import tuc_breakage

        tuc_breakage.install(os.environ["TUC_BREAK"])


if os.environ.get("TUC_EMULATE") or os.environ.get("TUC_BREAK") or os.environ.get("TUC_EMULATE_CUDAGRAPHS"):
    tuc_hooks.once_imported("torch", _install)  # now, where torch came first (a .pth file imported it)
