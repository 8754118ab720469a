"""The cross-version aspect (compare only): the baseline saves its outputs, weights, inputs and fp64 golden, the
candidate computes the same function from them (run.py); judged by the closeness rule against the baseline's golden
with the baseline's error as the reference, its own fp64 golden unchanged (judge.py); shown in its own table of the
comparison (render.py)."""
