"""The deterministic-backward aspect: FlexAttention's compiled backward twice under deterministic algorithms on CUDA
(run.py), judged by the determinism family's rule (judge.py)."""
