"""The compile family (compile, compile-mode): torch.compile's outputs against eager's, as the workload compiles (run.py),
judged tensor by tensor and, in compare, against the baseline's compiled outputs and graphs (judge.py)."""
