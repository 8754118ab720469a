"""The training-curve aspect: a short seeded training run, twice (run.py), judged finite and, in compare, within the
band around the baseline's curve (judge.py)."""
