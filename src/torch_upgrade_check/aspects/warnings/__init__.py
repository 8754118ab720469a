"""The warnings aspect: the warnings a workload raised in its worker, listed (run.py); passed alone, and in compare
judged by what is new in the candidate (judge.py)."""
