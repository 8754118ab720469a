"""The compile-cache aspect: a cold compile, then a fresh process compiling from its Inductor caches (run.py), which
must load what the first compiled and compute what it computed (judge.py)."""
