"""The memory aspect: the peak memory of one forward (and backward) with the backend's own counter, and the host
RAM's growth meanwhile (run.py), recorded (judge.py); in compare measured A/B against its threshold."""
