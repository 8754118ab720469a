"""The resolve aspect: each side's stack resolved by pip's dry run on the host before anything is installed
(host.py), judged (judge.py), shown in the summary (render.py)."""
