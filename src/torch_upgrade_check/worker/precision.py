"""float32 precision ("ieee" or "tf32") for cuBLAS and cuDNN, set, read, saved and restored through torch's legacy
and new (2.9+) APIs alike, which must agree."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

# The new API's per-backend settings (torch 2.9+), parents before children: restoring a parent may reset its children.
NEW_API = ("", "cuda.matmul", "cudnn", "cudnn.conv", "cudnn.rnn", "mkldnn", "mkldnn.matmul", "mkldnn.conv",
           "mkldnn.rnn")


def get_fp32_precision() -> dict[str, str]:
    """The float32 precision as ATen answers it: the getters cuBLAS and cuDNN setup call (which raise when the
    legacy and new APIs disagree), and the new API's per-backend values where this torch has them."""
    b = torch.backends
    out = {"cuda.matmul.allow_tf32": str(torch._C._get_cublas_allow_tf32()),
           "cudnn.allow_tf32": str(torch._C._get_cudnn_allow_tf32()),
           "float32_matmul_precision": torch.get_float32_matmul_precision()}
    if new_precision_api():
        out.update({"cuda.matmul": b.cuda.matmul.fp32_precision, "cudnn.conv": b.cudnn.conv.fp32_precision,
                    "cudnn.rnn": b.cudnn.rnn.fp32_precision})
    return out


def set_fp32_precision(mode: str) -> None:
    """cuBLAS matmuls and cuDNN convolutions/RNNs in "ieee" float32 or "tf32", set through both APIs alike.

    torch 2.9+ raises at every cuBLAS handle setup (and in Dynamo, which reads the legacy precision) when the
    legacy flags and the new `fp32_precision` disagree; its legacy setters update the new API, its new setters
    leave the legacy flags alone. So the legacy settings are set first (they are the only API before 2.9), then
    the new API's per-op values to the same mode. The legacy matmul precision is one value for every backend
    (`get_float32_matmul_precision` raises when cuBLAS's and oneDNN's disagree), so it is set as a whole.
    """
    b, tf32 = torch.backends, mode == "tf32"
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    b.cudnn.allow_tf32 = tf32
    if new_precision_api():
        b.cuda.matmul.fp32_precision = b.cudnn.conv.fp32_precision = b.cudnn.rnn.fp32_precision = mode


def save_fp32_precision() -> dict[str, Any]:
    """Every setting `set_fp32_precision` may change, raw (no consistency check), to restore exactly."""
    saved: dict[str, Any] = {"matmul": raw(torch.get_float32_matmul_precision),
                             "cudnn": raw(torch._C._get_cudnn_allow_tf32)}
    if new_precision_api():
        saved["new"] = {path: attr(path).fp32_precision for path in NEW_API
                        if hasattr(attr(path), "fp32_precision")}
    return saved


def restore_fp32_precision(saved: dict[str, Any]) -> None:
    """Legacy first (its setters rewrite the new API's values), then the new API's values as they were."""
    if saved["matmul"] is not None:
        torch.set_float32_matmul_precision(saved["matmul"])
    if saved["cudnn"] is not None:
        torch.backends.cudnn.allow_tf32 = saved["cudnn"]
    for path, value in saved.get("new", {}).items():
        attr(path).fp32_precision = value


def raw(get: Callable[[], Any]) -> Any:
    """A legacy getter's value, None where it raises (the two APIs already disagreed: nothing to restore)."""
    try:
        return get()
    except RuntimeError:
        return None


def attr(path: str) -> Any:
    """torch.backends.<path> ("" is torch.backends itself); None where this torch has no such backend."""
    obj: Any = torch.backends
    for part in filter(None, path.split(".")):
        obj = getattr(obj, part, None)
    return obj


def new_precision_api() -> bool:
    return hasattr(getattr(torch.backends.cudnn, "conv", None), "fp32_precision")
