"""What the artifact family's tests share (tests/aspects/export, onnx, artifact): the small model they export,
script, ship and run in onnxruntime, and a rule's verdict on metrics as the worker sends them (through verdicts)."""

from __future__ import annotations

from torch_upgrade_check.analysis.verdicts import decide
from torch_upgrade_check.model import CheckSpec, Observation, Outcome

SCRIPTED_MODEL = '''import torch
from torch import nn


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(16, 8)

    def forward(self, x):
        return nn.functional.gelu(self.proj(x)).sum(-1)


def build():
    return Head(), (torch.randn(4, 16),)
'''

EXPORT = CheckSpec("head", "export", "cpu", "float32")
# a program's output within eager's error (the compile rule's reference)
CLOSE = {"name": "reloaded:output", "numel": 8, "scale": 1.0, "max_abs_err": 1e-7, "mismatched": 0, "rmse": 1e-7,
         "nan": 0, "ref_rmse": 1e-7}


def judged(spec: CheckSpec = EXPORT, **metrics: object) -> tuple[Outcome, str]:
    result = decide(spec, Observation(id=spec.id, status="ok", metrics=dict(metrics)))
    return result.outcome, result.reason
