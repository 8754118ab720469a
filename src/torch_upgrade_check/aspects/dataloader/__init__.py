"""The dataloader aspect: the workload's dataset through DataLoader worker processes (run.py), judged against
num_workers=0's batches (judge.py), shown in the summary (render.py)."""
