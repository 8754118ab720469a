"""The api aspect: the torch names the team's Python files use, scanned on the host (host.py, host_guards.py;
TorchFix through host_lint.py) and asked of each side's torch (apinames.py, inside the environment), judged
(judge.py), shown in the summary (render.py)."""
