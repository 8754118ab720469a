"""The worker: runs inside the environment under test; the only package that imports torch.

It may import only the standard library, torch, and torch_upgrade_check.model / .schema / .suite.
"""


def first_line(error: BaseException) -> str:
    """An exception's first non-empty line: what a result's reason quotes of torch's (often long) message."""
    return next((line.strip() for line in str(error).splitlines() if line.strip()), "")
