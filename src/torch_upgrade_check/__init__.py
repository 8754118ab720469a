"""torch-upgrade-check: is upgrading PyTorch safe for these workloads? (stdlib only)"""

from __future__ import annotations

__version__ = "1.0.0"
