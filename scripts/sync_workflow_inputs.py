#!/usr/bin/env python3
"""Copy action.yml's inputs into the reusable workflow, between its marker lines (run after editing inputs).

The reusable workflow mirrors every input of the action, description and default included;
tests/action/test_action_metadata.py fails when the two drift apart. `--check` only says whether the workflow
is stale (exit 1). Stdlib only; what it shares with docs_tables.py is in generated_blocks.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # generated_blocks, also when loaded from elsewhere
from generated_blocks import ACTION, REUSABLE, replace_block, write_or_check  # noqa: E402

BEGIN = "      # --- mirrored from action.yml by scripts/sync_workflow_inputs.py: edit there, then run it ---"
END = "      # --- end of the inputs mirrored from action.yml ---"
# The action's inputs the workflow does not take: it uploads every runner's report folder itself.
NOT_MIRRORED = ("upload-report",)


def mirrored_inputs(action_text: str) -> list[str]:
    """action.yml's `inputs:` block (but NOT_MIRRORED), indented for workflow_call, `type: string`, no `required:`."""
    lines = action_text.splitlines()
    start = lines.index("inputs:") + 1
    end = next(i for i in range(start, len(lines)) if lines[i] and not lines[i].startswith((" ", "#")))
    out: list[str] = []
    skipping = False
    for line in lines[start:end]:
        if line.startswith("  ") and not line.startswith("   ") and line.strip().endswith(":"):
            skipping = line.strip()[:-1] in NOT_MIRRORED
        if skipping or line.strip().startswith("required:"):
            continue
        out.append("    " + line if line.strip() else "")
        if line.strip().startswith("default:"):
            out.append("    " + line[: len(line) - len(line.lstrip())] + "type: string")
    while out and not out[-1]:
        out.pop()
    return out


def render(workflow_text: str, action_text: str) -> str:
    """The reusable workflow with its mirrored inputs replaced by action.yml's current ones."""
    return replace_block(workflow_text, BEGIN, END, mirrored_inputs(action_text), REUSABLE.name)


def main(argv: list[str]) -> int:
    try:
        updated = render(REUSABLE.read_text(), ACTION.read_text())
    except ValueError as e:
        print(f"sync_workflow_inputs: {e}", file=sys.stderr)
        return 2
    return write_or_check(REUSABLE, updated, argv, "sync_workflow_inputs")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
