"""The cross-backend aspect: the workload on an accelerator against the same on the CPU and the fp64 golden (run.py),
judged by the closeness rule with the CPU as the reference (judge.py); a check whose ops fell back to the CPU on MPS
is not an MPS result."""
