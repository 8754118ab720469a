"""The numerics aspect: the workload's forward and backward against its fp64 golden (run.py), judged tensor by tensor
by the closeness rule (judge.py, whose typed metrics cross-backend's and cross-version's extend).

One folder an aspect: numerics, cross-backend, cross-version and sdpa-backends each run their own worker code; what
the closeness-judged ones share (the Metrics of a tensor-by-tensor comparison and its rule) is numerics' judge.py."""
