"""Model factories in the shapes torch-upgrade-check accepts: a mapping (with a loss) and a (model, inputs) tuple."""

from __future__ import annotations

import torch
from torch import nn


class TinyClassifier(nn.Module):
    """Linear -> LayerNorm -> GELU -> Linear: 3 classes from 16 features."""

    def __init__(self, features: int = 16, hidden: int = 32, classes: int = 3) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(features, hidden), nn.LayerNorm(hidden), nn.GELU(), nn.Linear(hidden, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class Readings(torch.utils.data.Dataset):
    """The classifier's training data: reading i is made from i alone, so a DataLoader worker process makes the
    same one as the training script. A module-level class: spawn and forkserver workers import it by name."""

    def __len__(self) -> int:
        return 40

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        features = torch.arange(16, dtype=torch.float32).mul(i % 5).remainder(7)
        return features, i % 3


def collate_readings(items: list[tuple[torch.Tensor, int]]) -> dict[str, torch.Tensor]:
    """The training loop's batches: the readings stacked, their labels as a tensor."""
    return {"x": torch.stack([x for x, _ in items]), "label": torch.tensor([y for _, y in items])}


def build_classifier(device: str = "cpu", dtype: torch.dtype = torch.float32) -> dict:
    """Takes device and dtype, so the runner builds it in place; the loss enables gradients and determinism; the
    dataset and collate are what the training job loads through a DataLoader (the dataloader check)."""
    model = TinyClassifier().to(device, dtype)
    x = torch.randn(8, 16, device=device, dtype=dtype)
    targets = torch.arange(8, device=device) % 3
    return {
        "model": model,
        "inputs": (x,),
        # cross_entropy in float32 whatever the dtype under test, so the loss itself adds no rounding
        "loss": lambda out: nn.functional.cross_entropy(out.float(), targets),
        "dataset": Readings(),
        "collate": collate_readings,
    }


def build_encoder() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """Takes no arguments: the runner moves the model and the floating-point inputs to the device and dtype."""
    model = nn.Sequential(
        nn.Conv1d(4, 8, kernel_size=3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool1d(1),
        nn.Flatten(),
        nn.Linear(8, 5),
    )
    return model, (torch.randn(2, 4, 32),)
