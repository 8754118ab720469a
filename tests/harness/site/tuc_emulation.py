"""An emulated CUDA or MPS backend on the CPU, for tests: the worker's real `cuda`/`mps` code runs unchanged.

Loaded by the harness's sitecustomize when TUC_EMULATE is `cuda` or `mps`. Tensors "on" the emulated
device are wrapper subclasses (`EmulatedTensor`) around CPU tensors: Python sees `device.type == "mps"`
(so torch's own device logic, e.g. FlexAttention's "no backward on MPS", runs as on a Mac), autograd
sees a PrivateUse1 device with a no-op guard, and every aten op is computed on the CPU. On top of that
the documented constraints of each backend are enforced:

- MPS has no float64: creating one raises, and converting an MPS tensor straight to CPU float64
  raises (TUC_EMULATE_MPS_FLOAT64=raise) or silently gives zeros (=zeros, as pytorch#197715 reports
  for 2.14.0); moving to the CPU first and converting there works, as on a Mac.
- CUDA TF32: on compute capability >= 8.0, float32 matmuls and convolutions round their inputs to
  TF32 (10-bit mantissa) whenever ATen's own getters allow TF32 (`torch._C._get_cublas_allow_tf32()`
  and `torch.get_float32_matmul_precision()` for matmuls, `torch._C._get_cudnn_allow_tf32()` for
  convolutions, asked at every op as cuBLAS and cuDNN setup ask them, so a mix of the legacy and new
  TF32 APIs raises here as it does on CUDA; cuDNN convolutions allow TF32 by default);
  TUC_EMULATE_TF32=always rounds whatever the flags say (a torch that ignores them).
- Kernels are asynchronous: each op adds TUC_EMULATE_KERNEL_US microseconds of "device time" that
  is paid (slept) only at torch.cuda/mps.synchronize() or a copy to the host, so a timer read
  without synchronising misses it, as on a GPU.
- Memory counters with each backend's semantics: CUDA's exact live/peak allocated bytes with
  reset_peak_memory_stats (which restarts the peak at what is allocated, weights included); the card holds
  TUC_EMULATE_MEMORY_MIB (default 81920, an 80 GiB H100, its get_device_properties().total_memory): an allocation
  past it raises torch.OutOfMemoryError with CUDA's message and allocates nothing, as the caching allocator does
  (the CUDA context and the allocator's rounding and cache are not emulated); MPS's current_allocated_memory (live) and driver_allocated_memory (a
  pool that grows to the high-water mark in 1 MiB steps and shrinks only at empty_cache()).
- Deterministic algorithms on CUDA need CUBLAS_WORKSPACE_CONFIG, as cuBLAS does.
- CUDA and fork: a process that made a CUDA tensor (or called torch.cuda.init) has initialised CUDA; a child it forks
  then cannot: its first CUDA tensor, torch.cuda._lazy_init or pinned memory raises torch's "Cannot re-initialize
  CUDA in forked subprocess" (torch.cuda._is_in_bad_fork() says so), while spawned and forkserver children start
  afresh. Pinned host memory: Tensor.pin_memory() returns a copy that reports is_pinned() (the copy itself, not views
  of it; an emulated device tensor cannot be pinned), so DataLoader's pin_memory=True runs its pinning thread; a
  0-element tensor's copy reports False, as CUDA's does (no memory was allocated to pin: pytorch#14560; an H100 with
  torch 2.11.0+cu130 said so, 2026-12-05).
- Device properties: TUC_EMULATE_CAPABILITY (default 9.0), TUC_EMULATE_DEVICE_COUNT (default 1); the wheel's
  compiled architectures (torch._C._cuda_getArchFlags): TUC_EMULATE_ARCHS (default "sm_80 sm_90 compute_90").
- Autocast: `torch.autocast(KIND, dtype)` casts as the device's autocast does, for the ops that decide a
  model's dtypes (matmuls, linear, convolutions and attention to the autocast dtype; norms, softmax and
  losses to float32), at the autocast dispatch key, so autograd records the casts. Other ops run in the
  dtype they get, as autocast's promote rules would leave them here. The GradScaler is torch's own.

Not emulated: torch.compile (Dynamo refuses to trace under these modes and runs the frame eagerly,
which the compile check must report), FlexAttention's internal compile (turned off here:
_FLEX_ATTENTION_DISABLE_COMPILE_DEBUG), NCCL, real kernels' numerics beyond TF32 rounding.
"""

from __future__ import annotations

import math
import os
import time
import warnings
import weakref
from typing import Any, ClassVar

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes
from torch.utils._pytree import tree_map

KIND = os.environ.get("TUC_EMULATE", "")
CAPABILITY = tuple(int(x) for x in os.environ.get("TUC_EMULATE_CAPABILITY", "9.0").split("."))
DEVICE_COUNT = int(os.environ.get("TUC_EMULATE_DEVICE_COUNT", "1"))
KERNEL_S = float(os.environ.get("TUC_EMULATE_KERNEL_US", "0")) / 1e6
MPS_FLOAT64 = os.environ.get("TUC_EMULATE_MPS_FLOAT64", "raise")
TF32 = os.environ.get("TUC_EMULATE_TF32", "flags")
ARCHS = os.environ.get("TUC_EMULATE_ARCHS", "sm_80 sm_90 compute_90")
CARD_BYTES = int(os.environ.get("TUC_EMULATE_MEMORY_MIB", "81920")) * 2**20
CUDA_OOM = ("CUDA out of memory. Tried to allocate {asked}. GPU 0 has a total capacity of {total} of which {free} is "
            "free. Of the allocated memory {allocated} is allocated by PyTorch. If reserved but unallocated memory is "
            "large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.")
# The macOS the emulated Mac runs: torch asks it through torch._C._mps_is_on_macos_or_newer(major, minor) (behind
# torch.backends.mps.is_macos_or_newer); below 14.0 every op on an MPS bfloat16 tensor raises, as ATen's
# getMPSDataType does (TORCH_CHECK_TYPE in checkSupportsBFloat16).
MACOS = tuple(int(x) for x in os.environ.get("TUC_EMULATE_MACOS", "14.5").split("."))
NO_BFLOAT16 = "MPS bfloat16 type is supported on MacOS 14.0 or newer."
NO_MPS_KERNEL = "Could not run 'aten::{op}' with arguments from the 'MPS' backend."
# Ops the emulated MPS lacks (aten names, comma-separated): torch raises for them, or with
# PYTORCH_ENABLE_MPS_FALLBACK=1 runs them on the CPU with a warning, once per process unless warn-always is on.
MPS_MISSING = {x.strip() for x in os.environ.get("TUC_EMULATE_MPS_MISSING", "").split(",") if x.strip()}
MPS_UNSUPPORTED = ("The operator 'aten::{op}' is not currently implemented for the MPS device. As a temporary fix, "
                   "you can set the environment variable `PYTORCH_ENABLE_MPS_FALLBACK=1` to use the CPU as a "
                   "fallback for this op. WARNING: this will be slower than running natively on MPS.")
MPS_FELL_BACK = ("The operator 'aten::{op}' is not currently supported on the MPS backend and will fall back to run "
                 "on the CPU. This may have performance implications.")
BACKING = "tucemu"  # the PrivateUse1 name autograd sees; Python sees KIND
NO_FLOAT64 = ("Cannot convert a MPS Tensor to float64 dtype as the MPS framework doesn't support float64. "
              "Please use float32 instead.")
BAD_FORK = ("Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, you must use the "
            "'spawn' start method")
CUBLAS_ERROR = ("Deterministic behavior was enabled with either `torch.use_deterministic_algorithms(True)` or "
                "`at::Context::setDeterministicAlgorithms(true)`, but this operation is not deterministic because "
                "it uses CuBLAS and you have CUDA >= 10.2. To enable deterministic behavior in this case, you must "
                "set an environment variable before running your PyTorch application: CUBLAS_WORKSPACE_CONFIG=:4096:8 "
                "or CUBLAS_WORKSPACE_CONFIG=:16:8.")
MM_OPS = {"mm", "addmm", "bmm", "baddbmm", "addbmm"}
CONV_OPS = {"convolution", "convolution_backward"}


class _State:
    debt_s = 0.0  # device time queued and not yet waited for
    live: ClassVar[dict[int, list[int]]] = {}  # storage data_ptr -> [nbytes, wrappers alive]
    live_bytes = 0
    peak_bytes = 0
    pool_bytes = 0
    libraries: ClassVar[list[Any]] = []  # torch.library registrations live as long as their Library objects
    fell_back: ClassVar[set[str]] = set()  # MPS_MISSING ops already warned about (torch warns once per process)
    initialised = False  # CUDA initialised in this process (a CUDA tensor made, torch.cuda.init)
    bad_fork = False  # forked from a process that had: CUDA cannot start here


def _device() -> torch.device:
    return torch.device(KIND, 0)


class EmulatedTensor(torch.Tensor):
    """A tensor on the emulated device: its data is a CPU tensor, `inner`."""

    inner: torch.Tensor

    @staticmethod
    def __new__(cls, inner: torch.Tensor) -> EmulatedTensor:
        out = torch.Tensor._make_wrapper_subclass(
            cls, inner.size(), strides=inner.stride(), storage_offset=inner.storage_offset(), dtype=inner.dtype,
            layout=inner.layout, device=torch.device(BACKING, 0), requires_grad=False)
        out.inner = inner
        _track(out, inner)
        return out

    @property
    def device(self) -> torch.device:  # type: ignore[override]
        return _device()

    @property
    def is_cuda(self) -> bool:  # type: ignore[override]
        return KIND == "cuda"

    @property
    def is_mps(self) -> bool:  # type: ignore[override]
        return KIND == "mps"

    @property
    def is_cpu(self) -> bool:  # type: ignore[override]
        return False

    def __repr__(self) -> str:  # torch's printer would dispatch many ops
        return f"EmulatedTensor({KIND}, shape={tuple(self.shape)}, dtype={self.dtype})"

    def __reduce_ex__(self, protocol: int):  # type: ignore[override]
        # torch.save: the data, as a device tensor's is; loading it with map_location="cpu" gives a CPU tensor
        return self.inner.detach().__reduce_ex__(protocol)

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        return _dispatch(func, args, kwargs or {})


def _track(outer: EmulatedTensor, inner: torch.Tensor) -> None:
    try:
        storage = inner.untyped_storage()
    except (RuntimeError, NotImplementedError):
        return
    key, nbytes = storage.data_ptr(), storage.nbytes()
    if not key or not nbytes:
        return
    entry = _State.live.get(key)
    if entry is None:
        _check_fits(nbytes)
        _State.live[key] = [nbytes, 1]
        _State.live_bytes += nbytes
        _State.peak_bytes = max(_State.peak_bytes, _State.live_bytes)
        _State.pool_bytes = max(_State.pool_bytes, _round_mib(_State.live_bytes))
    else:
        entry[1] += 1
    weakref.finalize(outer, _release, key)


def _check_fits(nbytes: int) -> None:
    """CUDA's caching allocator refuses an allocation the card cannot hold, before allocating anything."""
    if KIND == "cuda" and _State.live_bytes + nbytes > CARD_BYTES:
        raise torch.OutOfMemoryError(CUDA_OOM.format(
            asked=_mib_gib(nbytes), total=_mib_gib(CARD_BYTES), free=_mib_gib(CARD_BYTES - _State.live_bytes),
            allocated=_mib_gib(_State.live_bytes)))


def _mib_gib(n: int) -> str:
    """Bytes as the allocator's message writes them: '16.00 MiB', '79.19 GiB'."""
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.2f} MiB"


def _release(key: int) -> None:
    entry = _State.live.get(key)
    if entry is None:
        return
    entry[1] -= 1
    if entry[1] <= 0:
        _State.live_bytes -= entry[0]
        del _State.live[key]


def _round_mib(n: int) -> int:
    return -(-n // 2**20) * 2**20


def _is_emulated_device(device: Any) -> bool:
    if device is None:
        return False
    try:
        return torch.device(device).type in (KIND, BACKING)
    except (RuntimeError, TypeError):
        return False


def _initialise() -> None:
    """torch.cuda._lazy_init: refused in a child forked from a process that had initialised CUDA, as torch does."""
    if _State.bad_fork:
        raise RuntimeError(BAD_FORK)
    _State.initialised = True


def _forked() -> None:
    _State.bad_fork = _State.initialised


def _wrap(x: Any) -> Any:
    if isinstance(x, torch.Tensor) and not isinstance(x, EmulatedTensor):
        if KIND == "cuda":
            _initialise()  # a CUDA tensor made: CUDA is initialised (or refuses to be, in a bad fork)
        if KIND == "mps" and x.dtype == torch.float64:
            raise TypeError(NO_FLOAT64)
        _check_bfloat16(x.dtype)
        return EmulatedTensor(x)
    return x


def _check_bfloat16(dtype: torch.dtype | None) -> None:
    if KIND == "mps" and dtype == torch.bfloat16 and MACOS < (14, 0):
        raise TypeError(NO_BFLOAT16)


def _pay_debt() -> None:
    if _State.debt_s > 0:
        time.sleep(_State.debt_s)
    _State.debt_s = 0.0


def _tf32_allowed(op: str) -> bool:
    """Asked at every matmul and convolution, of ATen's own getters, as cuBLAS handle setup and cuDNN's
    convolution setup ask them: where the legacy and new TF32 APIs disagree they raise, as on CUDA."""
    if KIND != "cuda" or CAPABILITY < (8, 0):
        return False
    if op in CONV_OPS:
        allowed = torch._C._get_cudnn_allow_tf32()
    else:
        torch.get_float32_matmul_precision()  # what Dynamo and Inductor read for matmuls: raises on a mix too
        allowed = torch._C._get_cublas_allow_tf32()
    return TF32 == "always" or bool(allowed)


def round_tf32(t: torch.Tensor) -> torch.Tensor:
    """float32 -> the nearest value with TF32's 10-bit mantissa (ties to even), as tensor cores read it."""
    bits = t.contiguous().view(torch.int32)
    lsb = (bits >> 13) & 1
    rounded = (bits + 0xFFF + lsb) & ~0x1FFF
    finite = torch.isfinite(t.contiguous())
    return torch.where(finite, rounded.view(torch.float32), t.contiguous()).view_as(t)


def _dispatch(func, args, kwargs):
    if torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.FAKE) is not None:
        # torch's own tracing (FlexAttention's autograd builds its backward graph with fake tensors):
        # fake tensors of the emulated device live on the backing device, which autograd can guard.
        if _is_emulated_device(kwargs.get("device")):
            kwargs = {**kwargs, "device": torch.device(BACKING, 0)}
        return func(*args, **kwargs)
    emulated = False

    def unwrap(x: Any) -> Any:
        nonlocal emulated
        if isinstance(x, EmulatedTensor):
            emulated = True
            return x.inner
        return x

    inner_args, inner_kwargs = tree_map(unwrap, args), tree_map(unwrap, kwargs)
    device = inner_kwargs.get("device")
    to_host = emulated and device is not None and torch.device(device).type == "cpu"
    if _is_emulated_device(device):
        inner_kwargs["device"] = torch.device("cpu")
        emulated = True
    if not emulated:
        return func(*inner_args, **inner_kwargs)
    name = func.__name__.split(".")[0]
    if KIND == "mps" and name == "_fused_sdp_choice":  # ATen registers no MPS kernel for the SDPA chooser
        raise NotImplementedError(NO_MPS_KERNEL.format(op=name))
    if KIND == "mps" and name in MPS_MISSING:
        if os.environ.get("PYTORCH_ENABLE_MPS_FALLBACK") != "1":
            raise NotImplementedError(MPS_UNSUPPORTED.format(op=name))
        if torch.is_warn_always_enabled() or name not in _State.fell_back:
            _State.fell_back.add(name)
            warnings.warn(MPS_FELL_BACK.format(op=name), UserWarning, stacklevel=2)
    if KIND == "mps" and inner_kwargs.get("dtype") == torch.float64:
        if not to_host or MPS_FLOAT64 == "raise":
            raise TypeError(NO_FLOAT64)
        _pay_debt()
        return torch.zeros_like(inner_args[0], dtype=torch.float64, device="cpu")
    if KIND == "cuda" and name in MM_OPS and torch.are_deterministic_algorithms_enabled() \
            and os.environ.get("CUBLAS_WORKSPACE_CONFIG") not in (":4096:8", ":16:8"):
        raise RuntimeError(CUBLAS_ERROR)
    if (name in MM_OPS or name in CONV_OPS) and _tf32_allowed(name):
        inner_args = tuple(round_tf32(a) if isinstance(a, torch.Tensor) and a.dtype == torch.float32 else a
                           for a in inner_args)
    if to_host or name in ("_local_scalar_dense", "equal", "is_nonzero"):
        _pay_debt()  # a copy to the host waits for the queued kernels, as on a GPU
    else:
        _State.debt_s += KERNEL_S
    out = func(*inner_args, **inner_kwargs)
    if to_host or not isinstance(out, (torch.Tensor, tuple, list)):
        return out
    if name.endswith("_") and args and isinstance(args[0], EmulatedTensor):
        return args[0]  # in-place: the same tensor, not a new wrapper
    if "out" in kwargs and isinstance(kwargs["out"], EmulatedTensor):
        return kwargs["out"]
    return tree_map(_wrap, out)


class _DispatchMode(TorchDispatchMode):
    """Catches what has no emulated tensor argument: factories with device=..., copies to the device, HOPs."""

    supports_higher_order_operators = True

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if isinstance(func, torch._ops.HigherOrderOperator):
            emulated = [False]

            def unwrap(x: Any) -> Any:
                if isinstance(x, EmulatedTensor):
                    emulated[0] = True
                    return x.inner
                return x

            inner_args, inner_kwargs = tree_map(unwrap, args), tree_map(unwrap, kwargs or {})
            with _disable_current_modes():
                out = func(*inner_args, **inner_kwargs)
            if emulated[0]:
                _State.debt_s += KERNEL_S
                return tree_map(_wrap, out)
            return out
        return _dispatch(func, args, kwargs or {})


class _FunctionMode(TorchFunctionMode):
    """`tensor.to("cuda")`, `.cuda()` and `module.to("mps")` never reach C++, which has no such backend here."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name == KIND == "cuda" and args and isinstance(args[0], torch.Tensor):
            return _to_device(args[0], None)
        if name == "to" and args and isinstance(args[0], torch.Tensor):
            device = kwargs.get("device", next((a for a in args[1:] if isinstance(a, (str, torch.device))), None))
            if _is_emulated_device(device):
                dtype = kwargs.get("dtype", next((a for a in args[1:] if isinstance(a, torch.dtype)), None))
                return _to_device(args[0], dtype)
        return func(*args, **kwargs)


def _to_device(tensor: torch.Tensor, dtype: torch.dtype | None) -> torch.Tensor:
    """A copy onto the emulated device that autograd sees (the dispatch mode computes and wraps it)."""
    dtype = dtype or tensor.dtype
    if KIND == "mps" and dtype == torch.float64:
        raise TypeError(NO_FLOAT64)
    _check_bfloat16(dtype)
    if isinstance(tensor, EmulatedTensor) and dtype == tensor.dtype:
        return tensor
    return torch.ops.aten._to_copy.default(tensor, dtype=dtype, device=torch.device(BACKING, 0))


def _patch_cuda() -> None:
    import torch.cuda as cuda

    class Props:
        name = f"NVIDIA emulated sm{CAPABILITY[0]}{CAPABILITY[1]}"
        major, minor = CAPABILITY
        total_memory = CARD_BYTES
        multi_processor_count = 132

        def __repr__(self) -> str:
            return f"_CudaDeviceProperties(name='{self.name}', major={self.major}, minor={self.minor})"

    cuda.is_available = lambda: True
    cuda.device_count = lambda: DEVICE_COUNT
    cuda.current_device = lambda: 0
    cuda.set_device = lambda device: None
    cuda._lazy_init = _initialise
    cuda._is_in_bad_fork = lambda: _State.bad_fork
    os.register_at_fork(after_in_child=_forked)

    def pin_memory(self: torch.Tensor, device: Any = None) -> torch.Tensor:
        if isinstance(self, EmulatedTensor):
            raise RuntimeError(f"cannot pin '{KIND} tensor' only dense CPU tensors can be pinned")
        _initialise()  # CUDA's host allocator
        pinned = self.clone()
        pinned.tuc_pinned = pinned.untyped_storage().nbytes() > 0  # CUDA's: no memory, nothing pinned (pytorch#14560)
        return pinned

    torch.Tensor.pin_memory = pin_memory
    torch.Tensor.is_pinned = lambda self, device=None: bool(getattr(self, "tuc_pinned", False))
    cuda.get_device_properties = lambda device=None: Props()
    cuda.get_device_capability = lambda device=None: CAPABILITY
    cuda.get_device_name = lambda device=None: Props.name
    cuda.synchronize = lambda device=None: _pay_debt()
    cuda.memory_allocated = lambda device=None: _State.live_bytes
    cuda.max_memory_allocated = lambda device=None: _State.peak_bytes
    cuda.memory_reserved = lambda device=None: _State.peak_bytes
    cuda.empty_cache = lambda: None

    def reset_peak(device: Any = None) -> None:
        _State.peak_bytes = _State.live_bytes

    cuda.reset_peak_memory_stats = reset_peak
    # the emulated device draws its random numbers from the CPU generator: its state is the CPU's
    cuda.get_rng_state_all = lambda: [torch.random.get_rng_state()]
    cuda.set_rng_state_all = lambda states: torch.random.set_rng_state(states[0])
    cuda.nccl.version = lambda: (2, 27, 3)
    torch.backends.cudnn.is_available = lambda: True
    torch.backends.cudnn.version = lambda: 91002
    torch.version.cuda = "12.8"
    torch._C._cuda_getArchFlags = lambda: ARCHS


def _patch_mps() -> None:
    import torch.mps as mps

    def empty_cache() -> None:
        _State.pool_bytes = _round_mib(_State.live_bytes)

    torch.backends.mps.is_available = lambda: True
    torch.backends.mps.is_built = lambda: True
    torch._C._mps_is_on_macos_or_newer = lambda major, minor: MACOS >= (major, minor)
    for cached in ("is_macos_or_newer", "is_macos13_or_newer"):  # lru-cached wrappers of the getter above
        getattr(getattr(torch.backends.mps, cached, None), "cache_clear", lambda: None)()
    mps.synchronize = _pay_debt
    mps.device_count = lambda: 1
    mps.current_allocated_memory = lambda: _State.live_bytes
    mps.driver_allocated_memory = lambda: _State.pool_bytes
    mps.recommended_max_memory = lambda: 16 * 2**30
    mps.empty_cache = empty_cache
    mps.get_rng_state = lambda device="mps": torch.random.get_rng_state()  # the emulated device draws from the CPU's
    mps.set_rng_state = lambda state, device="mps": torch.random.set_rng_state(state)


AUTOCAST_LOWER = ("linear", "matmul", "mm", "addmm", "bmm", "baddbmm", "addbmm", "conv1d", "conv2d", "conv3d",
                  "scaled_dot_product_attention")
AUTOCAST_FP32 = ("layer_norm", "group_norm", "softmax.int", "log_softmax.int", "mse_loss", "cross_entropy_loss",
                 "nll_loss")


def _patch_autocast() -> None:
    """Autocast for the emulated device: the PrivateUse1 autocast key with the casts above (torch registers none
    for it), switched on and off with the device's own torch.autocast."""
    from torch.amp import autocast_mode
    from torch.library import Library, fallthrough_kernel

    key = torch._C.DispatchKey.AutocastPrivateUse1
    _State.libraries = [Library("_", "IMPL"), Library("aten", "IMPL")]
    _State.libraries[0].fallback(fallthrough_kernel, key.name)

    def register(qualified: str, dtype_of: Any) -> None:
        name, _, overload = qualified.partition(".")
        op = getattr(getattr(torch.ops.aten, name), overload or "default")

        def kernel(*args: Any, **kwargs: Any) -> Any:
            dtype = dtype_of()

            def cast(x: Any) -> Any:
                return x.to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() and x.dtype != torch.float64 else x

            with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(key)):
                return op(*tree_map(cast, args), **tree_map(cast, kwargs))

        _State.libraries[1].impl(qualified, kernel, key.name)

    for name in AUTOCAST_LOWER:
        register(name, lambda: torch.get_autocast_dtype(BACKING))
    for name in AUTOCAST_FP32:
        register(name, lambda: torch.float32)
    enter, exit_ = autocast_mode.autocast.__enter__, autocast_mode.autocast.__exit__

    def __enter__(self: Any) -> Any:
        entered = enter(self)
        if self.device == KIND:
            self.emulated_prev = (torch.is_autocast_enabled(BACKING), torch.get_autocast_dtype(BACKING))
            torch.set_autocast_enabled(BACKING, self._enabled)
            torch.set_autocast_dtype(BACKING, self.fast_dtype)
        return entered

    def __exit__(self: Any, *exc: object) -> Any:
        if self.device == KIND:
            torch.set_autocast_enabled(BACKING, self.emulated_prev[0])
            torch.set_autocast_dtype(BACKING, self.emulated_prev[1])
        return exit_(self, *exc)

    autocast_mode.autocast.__enter__, autocast_mode.autocast.__exit__ = __enter__, __exit__


def install() -> None:
    if KIND not in ("cuda", "mps"):
        raise SystemExit(f"TUC_EMULATE must be cuda or mps, got {KIND!r}")
    from torch.utils.backend_registration import _setup_privateuseone_for_python_backend

    _setup_privateuseone_for_python_backend(BACKING)
    (_patch_cuda if KIND == "cuda" else _patch_mps)()
    _patch_autocast()
    import torch.nn.attention.flex_attention as flex

    flex._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG = True  # its internal torch.compile cannot run under these modes
    _FunctionMode().__enter__()
    _DispatchMode().__enter__()
    assert not math.isnan(KERNEL_S)
