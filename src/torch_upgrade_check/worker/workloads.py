"""Built-in workload factories, written to the same contract as users' factories.

A factory returns `(model, inputs)` or a mapping with `model`, `inputs` and optionally `loss`
(model output -> scalar, enabling training-step aspects), `tolerances` ({"rtol", "atol"}),
`reference` (callable on float64 CPU inputs giving the golden output, when the model in float64
is not the right golden), `skip` ({aspect: reason}; "gradients": forward only), `checkpoint_extra`
(an object the checkpoint aspect saves and loads beside the weights), `dynamic_inputs` (inputs of other sizes: one
set, or a list of sets, which the compile checks run with the dimensions that differ marked dynamic), `dataset` (a
map-style torch Dataset the training job loads through a DataLoader: the dataloader aspect) and `collate` (its
collate_fn; default_collate without one). Sizes are small: the suite must run on a 2-core CPU in minutes.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F


def _projection(out: Any) -> torch.Tensor:
    """A well-conditioned loss: the output's inner product with a fixed random tensor.

    Its gradient with respect to the output is that tensor, of order 1, so every gradient is well above
    rounding noise; a mean of squares after a normalisation layer has gradients near 1e-9, which are
    all rounding noise. Computed in float32 at least (float64 for the golden: never rounded down).
    """
    compute = torch.promote_types(out.dtype, torch.float32)
    weights = torch.randn(out.shape, generator=torch.Generator().manual_seed(1234), dtype=torch.float64)
    return (out.to(compute) * weights.to(compute).to(out.device)).sum()  # cast on the host: MPS has no float64


@dataclasses.dataclass
class TrainConfig:
    """What a training job keeps beside its weights: the built-in models' `checkpoint_extra`, a user-defined class
    that the default `torch.load` (weights_only, torch 2.6+) reads only once it is allowed, as below."""

    lr: float = 1e-3
    warmup_steps: int = 100
    schedule: str = "cosine"


if hasattr(torch.serialization, "add_safe_globals"):  # torch 2.4+; before 2.6 torch.load needs no allowing
    torch.serialization.add_safe_globals([TrainConfig])  # what a training script does for its own classes since 2.6


class IndexedItems(torch.utils.data.Dataset):
    """mlp's training data: item i is computed from i alone, in exact integer arithmetic (features are multiples of
    1/8 below 4), so a DataLoader worker process makes the parent's item bit for bit, in every torch version. A
    module-level class: spawn and forkserver workers unpickle it by name."""

    def __init__(self, items: int = 60, features: int = 64) -> None:
        self.items, self.features = items, features

    def __len__(self) -> int:
        return self.items

    def __getitem__(self, i: int) -> dict[str, Any]:
        x = ((torch.arange(self.features) * 7 + i * 13) % 29).to(torch.float32) / 8
        return {"x": x, "y": torch.tensor(i % 16), "index": i}


# the batch sizes mlp's compile checks also run, its batch dimension marked dynamic (as a server's varying batches are)
MLP_BATCHES = (8, 48)


def mlp(device: str, dtype: torch.dtype) -> dict[str, Any]:
    model = nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 128), nn.GELU(), nn.Linear(128, 16))
    x = torch.randn(32, 64)
    other = [(torch.randn(n, 64).to(device, dtype),) for n in MLP_BATCHES]  # drawn last: the weights and x unchanged
    return {"model": model.to(device, dtype), "inputs": (x.to(device, dtype),), "loss": _projection,
            "checkpoint_extra": TrainConfig(), "dynamic_inputs": other, "dataset": IndexedItems()}


def cnn(device: str, dtype: torch.dtype) -> dict[str, Any]:
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(16, 10),
    )
    x = torch.randn(8, 3, 16, 16)
    return {"model": model.to(device, dtype), "inputs": (x.to(device, dtype),), "loss": _projection,
            "checkpoint_extra": TrainConfig()}


def transformer_block(device: str, dtype: torch.dtype) -> dict[str, Any]:
    model = nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, dropout=0.0, batch_first=True)
    x = torch.randn(4, 32, 64)
    return {"model": model.to(device, dtype), "inputs": (x.to(device, dtype),), "loss": _projection,
            "checkpoint_extra": TrainConfig()}


class _Sdpa(nn.Module):
    uses_sdpa = True  # numerics records which SDPA backend the default dispatch picks

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def _qkv(device: str, dtype: torch.dtype, requires_grad: bool) -> tuple[torch.Tensor, ...]:
    shape = (2, 4, 64, 32)
    return tuple(torch.randn(shape).to(device, dtype).requires_grad_(requires_grad) for _ in range(3))


def _math_attention(q, k, v, score_mod=None, mask_mod=None) -> torch.Tensor:
    """Plain softmax(QK^T/sqrt(d) + mods)V with index tensors broadcast like FlexAttention's."""
    b, h, s, d = q.shape
    scores = q @ k.transpose(-2, -1) / math.sqrt(d)
    bi = torch.arange(b).view(b, 1, 1, 1)
    hi = torch.arange(h).view(1, h, 1, 1)
    qi = torch.arange(s).view(1, 1, s, 1)
    ki = torch.arange(s).view(1, 1, 1, s)
    if score_mod is not None:
        scores = score_mod(scores, bi, hi, qi, ki)
    if mask_mod is not None:
        scores = scores.masked_fill(~mask_mod(bi, hi, qi, ki).expand_as(scores), float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def sdpa(device: str, dtype: torch.dtype) -> dict[str, Any]:
    def reference(q, k, v):
        return _math_attention(q, k, v, mask_mod=_causal)

    return {"model": _Sdpa(), "inputs": _qkv(device, dtype, True), "loss": _projection, "reference": reference}


def _causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def _sliding_window(b, h, q_idx, kv_idx):
    return (q_idx >= kv_idx) & (q_idx - kv_idx <= 16)


def _alibi(score, b, h, q_idx, kv_idx):
    slope = torch.exp2(-(h + 1).to(torch.float32) * 8.0 / 4)
    return score + slope.to(score.dtype) * (kv_idx - q_idx).to(score.dtype)


class _Flex(nn.Module):
    def __init__(self, score_mod, mask_mod, block_mask) -> None:
        super().__init__()
        self.score_mod = score_mod
        self.mask_mod = mask_mod  # kept for the deterministic-backward check, which builds its own block masks
        self.block_mask = block_mask

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        from torch.nn.attention.flex_attention import flex_attention

        return flex_attention(q, k, v, score_mod=self.score_mod, block_mask=self.block_mask)


def _flex(device: str, dtype: torch.dtype, score_mod=None, mask_mod=None) -> dict[str, Any]:
    """FlexAttention against math attention. Gradients are checked where the torch under test has a
    FlexAttention backward on this device (found by running one: CPU and MPS had none in 2.13)."""
    import warnings

    from torch.nn.attention.flex_attention import create_block_mask

    from torch_upgrade_check.worker import devices

    # Eager FlexAttention warns that it is unfused; eager is exactly what the numerics aspect wants.
    warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
    block_mask = None
    if mask_mod is not None:
        block_mask = create_block_mask(mask_mod, None, None, 64, 64, device=device)
    backward = devices.get(device).flex["backward"]
    spec: dict[str, Any] = {
        "model": _Flex(score_mod, mask_mod, block_mask),
        "inputs": _qkv(device, dtype, backward.ok),
        "loss": _projection,
        "reference": lambda q, k, v: _math_attention(q, k, v, score_mod=score_mod, mask_mod=mask_mod),
    }
    if not backward.ok:
        spec["skip"] = {"gradients": backward.reason, "determinism": backward.reason}
    return spec


def flex_attention_none(device: str, dtype: torch.dtype) -> dict[str, Any]:
    return _flex(device, dtype)


def flex_attention_causal(device: str, dtype: torch.dtype) -> dict[str, Any]:
    return _flex(device, dtype, mask_mod=_causal)


def flex_attention_sliding_window(device: str, dtype: torch.dtype) -> dict[str, Any]:
    return _flex(device, dtype, mask_mod=_sliding_window)


def flex_attention_alibi(device: str, dtype: torch.dtype) -> dict[str, Any]:
    return _flex(device, dtype, score_mod=_alibi)


class _Matmul(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a @ b


def matmul(device: str, dtype: torch.dtype) -> dict[str, Any]:
    a, b = torch.randn(128, 256), torch.randn(256, 128)
    spec: dict[str, Any] = {"model": _Matmul(), "inputs": (a.to(device, dtype), b.to(device, dtype))}
    if dtype == torch.float32:
        # 256-term dot products of values near 16 in magnitude: fp32 accumulation error reaches ~5e-5.
        spec["tolerances"] = {"rtol": 1e-5, "atol": 1e-4}
    return spec


BUILTIN = {
    f.__name__: f
    for f in (
        mlp,
        cnn,
        transformer_block,
        sdpa,
        flex_attention_none,
        flex_attention_causal,
        flex_attention_sliding_window,
        flex_attention_alibi,
        matmul,
    )
}
