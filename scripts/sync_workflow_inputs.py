#!/usr/bin/env python3
"""Copy action.yml's inputs into the reusable workflow, between its marker lines (run after editing inputs).

The reusable workflow mirrors every input of the action, description and default included;
tests/action/test_action_metadata.py fails when the two drift apart. Stdlib only.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ACTION = ROOT / "action.yml"
WORKFLOW = ROOT / ".github" / "workflows" / "torch-upgrade-check.yml"
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


def main() -> int:
    text = WORKFLOW.read_text()
    lines = text.splitlines()
    if BEGIN not in lines or END not in lines:
        print(f"{WORKFLOW}: marker lines not found; keep them around the mirrored inputs", file=sys.stderr)
        return 1
    i, j = lines.index(BEGIN), lines.index(END)
    new = [*lines[: i + 1], *mirrored_inputs(ACTION.read_text()), *lines[j:]]
    updated = "\n".join(new) + "\n"
    if updated != text:
        WORKFLOW.write_text(updated)
        print(f"updated {WORKFLOW.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
