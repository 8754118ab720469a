"""The imports aspect: every top-level module of each side's environment imported in a process of its own, on
the host (host.py, listed by importables.py inside the environment), judged (judge.py), shown in the summary
(render.py)."""
