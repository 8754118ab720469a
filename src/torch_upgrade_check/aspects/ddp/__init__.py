"""The ddp aspect: DistributedDataParallel training steps on the ranks torchrun starts (run.py), judged by fsdp2's
rule in DDP's words (judge.py), shown in the summary (render.py)."""
