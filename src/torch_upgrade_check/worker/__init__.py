"""The worker: runs inside the environment under test; the only package that imports torch.

It may import only the standard library, torch, and torch_upgrade_check.model / .schema / .suite.
"""
