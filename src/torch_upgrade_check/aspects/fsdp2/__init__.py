"""The fsdp2 aspect: fully_shard training steps on the ranks torchrun starts (run.py), judged against the unsharded
model and, in compare, the baseline's steps (judge.py: the rule ddp shares), shown in the summary (render.py)."""
