"""Pure decisions: statistics, comparisons and verdicts (no I/O, no torch)."""
