"""The `init` command: a starter config and a caller workflow (or, with --canary, the canary workflow) written into a repository."""

from __future__ import annotations

from pathlib import Path

from torch_upgrade_check import scaffold
from torch_upgrade_check.commands.common import say
from torch_upgrade_check.commands.settings import InitSettings
from torch_upgrade_check.errors import EXIT_PASSED


def execute(s: InitSettings) -> int:
    for path in scaffold.init(Path(s.dir), canary=s.canary):
        say(f"wrote {path}")
    if not s.canary:
        say("a nightly canary of the next torch, with history and trends, too? torch-upgrade-check init --canary")
    return EXIT_PASSED
