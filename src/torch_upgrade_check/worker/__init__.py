"""The worker: runs inside the environment under test; the only package that imports torch.

It may import only the standard library, torch, and torch_upgrade_check.model / .schema / .suite.
"""


def first_line(error: BaseException) -> str:
    """An exception's first non-empty line: what a result's reason quotes of torch's (often long) message."""
    return next((line.strip() for line in str(error).splitlines() if line.strip()), "")


def error_text(error: BaseException, limit: int = 300) -> str:
    """`Type: first line`, and the next line where the first only introduces it (torch's "backend='inductor' raised:",
    or Dynamo's "Constraints violated (...)! For more information, ..." before the constraint it names)."""
    lines = [line.strip().lstrip("- ").strip() for line in str(error).splitlines() if line.strip()]
    text = " ".join(lines[:2]) if len(lines) > 1 and (lines[0].endswith(":") or "For more information" in lines[0]) \
        else (lines[0] if lines else "")
    return f"{type(error).__name__}: {text}"[:limit]
