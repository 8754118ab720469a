"""The compiled-latency aspect: the compiled model's forward latency, timed as latency times eager's (run.py), and
judged by latency's rule (judge.py); in compare measured A/B with latency's threshold."""
