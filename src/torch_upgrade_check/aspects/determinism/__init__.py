"""The determinism aspect: two seeded training steps under deterministic algorithms (run.py), judged bitwise equal
(judge.py: the family's rule, deterministic-backward's too)."""
