"""The amp aspect: an autocast training step with GradScaler per low-precision dtype (run.py), judged against the
fp64 golden in unit roundoffs and, in compare, against the baseline's step (judge.py)."""
