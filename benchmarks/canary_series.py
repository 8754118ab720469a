"""Synthetic canary histories: a check's A/B ratio, one run a day on a shared runner (seeded, stdlib only).

A run's log ratio is Gaussian noise of sd NOISE; OUTLIERS of the runs are far off (a noisy neighbour: 10-25% either
way); from `step_at` on, the ratio is STEP times higher (a nightly that made the check slower).
"""

from __future__ import annotations

import math
import random

RUNS = 60  # two months of a daily canary
NOISE = 0.03
OUTLIERS = 0.03
STEP = 1.15


def series(seed: int, step_at: int | None, runs: int = RUNS) -> list[float]:
    rng = random.Random(seed)
    out = []
    for i in range(runs):
        x = rng.gauss(0.0, NOISE)
        if rng.random() < OUTLIERS:
            x += rng.choice((-1, 1)) * rng.uniform(0.10, 0.25)
        if step_at is not None and i >= step_at:
            x += math.log(STEP)
        out.append(math.exp(x))
    return out
