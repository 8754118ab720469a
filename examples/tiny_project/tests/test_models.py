"""The project's own tests; torch-upgrade-check runs them with the torch under test (pytest: in the config)."""

from __future__ import annotations

import torch
from tinymodels.models import build_classifier, build_encoder


def test_classifier_gives_finite_logits() -> None:
    torch.manual_seed(0)
    made = build_classifier()
    out = made["model"](*made["inputs"])
    assert out.shape == (8, 3)
    assert torch.isfinite(out).all()


def test_classifier_learns() -> None:
    torch.manual_seed(0)
    made = build_classifier()
    model, (x,), loss_fn = made["model"], made["inputs"], made["loss"]
    first = loss_fn(model(x)).item()
    for _ in range(20):
        model.zero_grad()
        loss_fn(model(x)).backward()
        with torch.no_grad():
            for param in model.parameters():
                param.sub_(0.1 * param.grad)
    assert loss_fn(model(x)).item() < first


def test_encoder_is_deterministic_in_eval() -> None:
    torch.manual_seed(0)
    model, inputs = build_encoder()
    model.eval()
    with torch.no_grad():
        assert torch.equal(model(*inputs), model(*inputs))
    assert model(*inputs).shape == (2, 5)
