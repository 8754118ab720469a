"""A pytest plugin: every warning the user's tests raise under the torch under test, one JSON line each.

Loaded into the user's pytest run by the orchestrator (`-p torch_upgrade_check.worker.pytest_warnings`,
with the file to write in TORCH_UPGRADE_CHECK_PYTEST_WARNINGS). Each warning is normalised in the
pytest process, where its module can still be found, exactly as the worker normalises a workload's
(warned.normalise, warned.module_of), so that the two sides of a compare record the same text.
"""

from __future__ import annotations

import json
import os
from typing import Any

from torch_upgrade_check.worker import warned

ENV = "TORCH_UPGRADE_CHECK_PYTEST_WARNINGS"


def pytest_warning_recorded(warning_message: Any, when: str, nodeid: str, location: Any) -> None:
    path = os.environ.get(ENV)
    if not path:
        return
    entry = {"category": warning_message.category.__name__, "message": warned.normalise(str(warning_message.message)),
             "module": warned.module_of(warning_message.filename), "test": nodeid or when}
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(entry) + "\n")
