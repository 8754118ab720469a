"""The op-latency aspect: the baseline's recorded aten ops timed one by one on each side (run.py), in compare's own
fresh process pairs (orchestrate.optiming), and judged op by op there (analysis.optiming); it warns, never fails."""
