"""The checkpoint aspect: a training state saved, loaded with the default torch.load and resumed (run.py), judged
bitwise against the uninterrupted step, in compare the baseline's file within tolerance (judge.py)."""
