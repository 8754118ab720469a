"""History across runs: records built from report.json, a JSON Lines store, and what reads it (host layer, no torch)."""
