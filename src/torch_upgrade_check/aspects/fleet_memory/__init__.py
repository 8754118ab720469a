"""The fleet-memory aspect: decided from a finished report (no worker side): each workload's peak device memory
against the fleet's smallest card (judge.py), shown in the summary (render.py)."""
