"""The ddp aspect's rule (pure): fsdp2's (aspects/fsdp2/judge.py) in DDP's words, on its typed metrics: DDP's
gradients are whole, all-reduced on every rank, each one "shard" of itself."""

from __future__ import annotations

from dataclasses import dataclass

from torch_upgrade_check.aspects._metrics import Judged
from torch_upgrade_check.aspects.fsdp2 import judge as fsdp2
from torch_upgrade_check.model import CheckSpec

WORDS = fsdp2.Words("DDP", "all-reduced gradients", "gradient", "all-reduced gradient",
                    "all-reduced gradients (each rank's)")
# its repro command repeats its row's switch (--ddp): --only alone matches no check where the switch is off
# (commands.argv.repro_command)
REPRO_SWITCH = True


@dataclass(frozen=True)
class Metrics(fsdp2.Metrics):
    """The ddp check's metrics (worker: aspects.ddp.run under worker.torchrun): fsdp2's figures."""


def judge(m: Metrics, spec: CheckSpec | None = None) -> Judged:
    """fsdp2's rule in DDP's words."""
    return fsdp2.distributed(m, WORDS, spec.dtype if spec is not None else "float32")
