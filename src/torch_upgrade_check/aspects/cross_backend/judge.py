"""cross-backend is judged by the closeness rule with the CPU as its reference, on numerics' typed metrics (pure);
a check on MPS whose ops fell back to the CPU and passed is not an MPS result (`skip_a_pass_on_the_cpu`)."""

from __future__ import annotations

from torch_upgrade_check.aspects.numerics.judge import Metrics, judge

__all__ = ["Metrics", "judge", "skip_a_pass_on_the_cpu"]


def skip_a_pass_on_the_cpu(said: str) -> str:
    """Why a passed check whose ops ran on the CPU (`said`: which, under PYTORCH_ENABLE_MPS_FALLBACK) is skipped: part
    of what it compared was the CPU with itself, which cannot pass as MPS (a mismatch it found still fails)."""
    return (f"not an MPS result: {said}, so the comparison with the CPU is partly the CPU with itself; unset "
            "PYTORCH_ENABLE_MPS_FALLBACK to compare MPS's kernels (an op MPS lacks then raises, naming it)")
