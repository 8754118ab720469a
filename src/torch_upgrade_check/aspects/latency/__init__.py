"""The latency aspect: the eager forward's latency, timed (run.py), judged against a --max-latency-ms limit
(judge.py); in compare measured A/B (orchestrate.measure) and judged against its threshold (analysis.abjudge)."""
