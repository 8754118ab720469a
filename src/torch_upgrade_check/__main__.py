"""`python -m torch_upgrade_check` runs the CLI."""

from __future__ import annotations

import sys

from torch_upgrade_check.cli import main

sys.exit(main())
