"""The test harness's sitecustomize: turns on what TUC_EMULATE / TUC_BREAK ask for in this interpreter.

It is put on PYTHONPATH by tests/harness.interpreter(); it never runs in the product.
"""

import os

if os.environ.get("TUC_EMULATE"):
    import tuc_emulation

    tuc_emulation.install()
if os.environ.get("TUC_BREAK"):
    import tuc_breakage

    tuc_breakage.install(os.environ["TUC_BREAK"])
