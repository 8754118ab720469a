"""The artifact aspect: a file the team ships (config `artifacts:`) loaded with default arguments and run (run.py),
its outputs finite, in compare the baseline's within tolerance (judge.py)."""
