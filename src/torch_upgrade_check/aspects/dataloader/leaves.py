"""A DataLoader batch read as {key: leaf} by content, and which of its tensors DataLoader's pin_memory must pin.

A batch is whatever the team's collate returns: tensors, mappings, lists and tuples, and also dataclasses,
namedtuples (by field name), numpy arrays and scalars, and any other object (by the state pickle carries, which is
what a worker process sends back: `__reduce_ex__`, else its `__dict__`). A leaf is a tensor (numpy arrays become
tensors of their dtype, or a digest of their bytes where torch has no such dtype), a number, a string or None: what
`torch.save(..., weights_only=True)` keeps, so the baseline saves them. Objects other than tensors, mappings, lists
and tuples add a `KEY.__class__` leaf naming their type. An object it cannot read at all is a leaf saying so (type
only) and is counted, never compared as equal by its repr (torch's repr summarises: element 5000 is not in it).
"""

from __future__ import annotations

import copyreg
import dataclasses
import hashlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from torch_upgrade_check.worker import first_line, tensors

UNREAD = "<not read> "  # the prefix of a leaf standing for an object whose content could not be read
MAX_DEPTH = 16  # deeper nesting is not read (and says so): a batch is not a linked list
PRIMITIVES = (bool, int, float, str)  # these exact types are leaves as they are (a subclass is an object)
NUMPY_TENSOR_KINDS = "biufc"  # numpy dtype kinds torch.from_numpy takes (unsigned wider than 8 bits: a digest)


@dataclass
class Read:
    """A batch read: its leaves; the tensors DataLoader's pin_memory reaches (by key; 0-element ones left out: they
    have no memory to pin); the tensors it leaves as they are (inside a type without a pin_memory method); and the
    objects not read, with why."""

    leaves: dict[str, Any] = field(default_factory=dict)
    pinnable: list[tuple[str, torch.Tensor]] = field(default_factory=list)
    not_reached: list[str] = field(default_factory=list)
    unread: dict[str, str] = field(default_factory=dict)


def read(batch: Any) -> Read:
    out = Read()
    _walk(batch, "", True, 0, (), out)
    return out


def leaves(batch: Any) -> dict[str, Any]:
    """A batch as {key: leaf}: `x`, `[0]`, `meta.ids`, `boxes.__class__`."""
    return read(batch).leaves


def _walk(obj: Any, key: str, reached: bool, depth: int, path: tuple[int, ...], out: Read) -> None:
    """Read `obj` at `key` into `out`; `reached`: whether DataLoader's pin_memory gets this far (it recurses into
    mappings, tuples and sequences, and calls an object's own pin_memory; it leaves any other object as it is)."""
    name = key or "batch"
    if isinstance(obj, torch.Tensor):
        _tensor(obj, name, reached, out)
    elif obj is None or type(obj) in PRIMITIVES:
        out.leaves[name] = obj
    elif isinstance(obj, (bytes, bytearray)):
        out.leaves[name] = _digest(type(obj).__name__, [len(obj)], bytes(obj))
    elif isinstance(obj, (type, _FUNCTIONS)):
        out.leaves[name] = f"<{type(obj).__name__}> {_qualified(obj)}"
    elif depth >= MAX_DEPTH or id(obj) in path:
        _unread(obj, name, f"nested deeper than {MAX_DEPTH} levels" if depth >= MAX_DEPTH else "it contains itself",
                out)
    else:
        for k, v, inner_reached in _children(obj, key, reached, out):
            _walk(v, k, inner_reached, depth + 1, (*path, id(obj)), out)


def _tensor(t: torch.Tensor, name: str, reached: bool, out: Read) -> None:
    cpu = t.device.type == "cpu"
    out.leaves[name] = (t.detach() if t.requires_grad else t) if cpu else tensors.host(t)
    if not cpu or t.numel() == 0:  # a 0-element tensor has no memory: is_pinned() is False even after pin_memory()
        return
    if reached:
        out.pinnable.append((name, t))  # the tensor itself: a detached view is another Python object
    else:
        out.not_reached.append(name)


def _children(obj: Any, key: str, reached: bool, out: Read) -> Iterator[tuple[str, Any, bool]]:
    """(key, value, whether pin_memory reaches it) of each part of a container or object; an object's type is a
    leaf of its own; numpy arrays become leaves here."""
    inside = reached and (hasattr(obj, "pin_memory") or isinstance(obj, (Mapping, tuple, list)))
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # a namedtuple: its field names, and its type
        out.leaves[_join(key, "__class__")] = _qualified(type(obj))
        yield from ((_join(key, str(f)), v, inside) for f, v in zip(obj._fields, obj))
    elif isinstance(obj, Mapping):
        yield from ((_join(key, str(k)), v, inside) for k, v in obj.items())
    elif isinstance(obj, (list, tuple)):
        yield from ((f"{key}[{i}]", v, inside) for i, v in enumerate(obj))
    elif isinstance(obj, (set, frozenset)):  # iteration order follows each process's string hash seed
        out.leaves[_join(key, "__class__")] = _qualified(type(obj))
        yield from ((f"{key}[{i}]", v, False) for i, v in enumerate(sorted(obj, key=repr)))
    elif _is_numpy(obj):
        yield from _numpy(obj, key, out)
    else:
        out.leaves[_join(key, "__class__")] = _qualified(type(obj))
        if dataclasses.is_dataclass(obj):
            parts: dict[str, Any] | None = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
        else:
            parts = _state(obj, key or "batch", out)
        yield from ((_join(key, k), v, inside) for k, v in (parts or {}).items())


def _join(key: str, name: str) -> str:
    return f"{key}.{name}" if key else name


def _is_numpy(obj: Any) -> bool:
    # no `import numpy` here: a batch holds a numpy object only where numpy is already imported
    return type(obj).__module__ == "numpy" and hasattr(obj, "__array__") and hasattr(obj, "dtype")


def _numpy(obj: Any, key: str, out: Read) -> Iterator[tuple[str, Any, bool]]:
    """A numpy array or scalar: its type, then its content as a tensor of its dtype, its elements (object and
    structured dtypes: read one by one), or a digest of its dtype, shape and bytes (strings, dates, wide unsigned)."""
    out.leaves[_join(key, "__class__")] = _qualified(type(obj))
    arr = obj.__array__()
    dtype = arr.dtype
    if dtype.kind in "OV":
        yield key, arr.tolist(), False
        return
    if dtype.kind in NUMPY_TENSOR_KINDS and dtype.isnative and not (dtype.kind == "u" and dtype.itemsize > 1):
        try:
            out.leaves[key or "batch"] = torch.from_numpy(arr.copy(order="C"))  # a copy: the batch may be reused
            return
        except (TypeError, RuntimeError):
            pass  # a dtype this torch cannot hold: the digest below
    out.leaves[key or "batch"] = _digest(f"ndarray {dtype.str}", list(arr.shape), arr.tobytes(order="C"))


def _digest(kind: str, shape: list[int], data: bytes) -> str:
    return f"<{kind}{shape}> sha256 {hashlib.sha256(data).hexdigest()[:32]}"


def _state(obj: Any, name: str, out: Read) -> dict[str, Any] | None:
    """What pickle carries of `obj` (its constructor's arguments, its state, its items), by attribute name where it
    has them; its `__dict__` where pickle refuses it; None (and `out.unread` says why) where neither is there."""
    try:
        reduced = obj.__reduce_ex__(4)
    except Exception as e:  # an object pickle refuses: read its attributes, if it has any
        if isinstance(getattr(obj, "__dict__", None), dict):
            return dict(vars(obj))
        _unread(obj, name, f"pickle refuses it ({type(e).__name__}: {first_line(e)}) and it has no __dict__", out)
        return None
    if isinstance(reduced, str):  # a module-level singleton, pickled by its name
        return {"__global__": reduced}
    func, args, state, items, dict_items = (*reduced, None, None, None)[:5]
    parts: dict[str, Any] = {}
    if getattr(func, "__name__", "") == "__newobj__":
        args = args[1:]  # the class itself: already its __class__ leaf
    elif func is not type(obj) and func is not copyreg._reconstructor:
        parts["__reduce__"] = f"<function> {_qualified(func)}"
    if args:
        parts["__args__"] = tuple(args)
    if isinstance(state, tuple) and len(state) == 2 and isinstance(state[1], dict) and (
            state[0] is None or isinstance(state[0], dict)):
        state = {**(state[0] or {}), **state[1]}  # (__dict__, __slots__ values)
    if isinstance(state, dict):
        parts.update({str(k): v for k, v in state.items()})
    elif state is not None:
        parts["__state__"] = state
    if items is not None:
        parts["__items__"] = list(items)
    if dict_items is not None:
        parts["__dict_items__"] = dict(dict_items)
    return parts


def _unread(obj: Any, name: str, why: str, out: Read) -> None:
    out.leaves[name] = f"{UNREAD}{_qualified(type(obj))}"  # its type only: what is compared of it
    out.unread[name] = f"{_qualified(type(obj))}: {why}"[:200]


_FUNCTIONS = (type(len), type(lambda: 0), type(copyreg))  # builtins, functions, modules: by their names


def _qualified(obj: Any) -> str:
    module = getattr(obj, "__module__", None) or ""
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or type(obj).__qualname__
    return f"{module}.{name}" if module and module != "builtins" else str(name)


def leaf_difference(a: Any, b: Any) -> str:
    """'' when `a` is bitwise `b`; else what differs (types, dtype and shape, how many elements and by how much)."""
    if isinstance(b, torch.Tensor) or isinstance(a, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            return f"{type(a).__name__} where num_workers=0 has {type(b).__name__}"
        if a.dtype != b.dtype or a.shape != b.shape:
            return f"{_kind(a)} where num_workers=0 has {_kind(b)}"
        if tensors.bitwise_equal(a, b):
            return ""
        return _elements_differ(tensors.host(a), tensors.host(b))
    if type(a) is float and type(b) is float and a != a and b != b:
        return ""  # NaN is NaN's value here, as bitwise_equal has it for tensors
    if type(a) is not type(b) or a != b:
        return f"{a!r} where num_workers=0 has {b!r}"[:200]
    return ""


def _elements_differ(x: torch.Tensor, y: torch.Tensor) -> str:
    count = x.numel()
    if x.is_complex():
        differ = int((x != y).sum())
        x, y = torch.view_as_real(x), torch.view_as_real(y)  # the max abs diff of either part
    elif not x.is_floating_point():
        differ = int((x != y).sum())
    else:
        differ = int((tensors.difference(x.double(), y.double()) != 0).sum())
    biggest = float(tensors.difference(x.double(), y.double()).max()) if x.numel() else 0.0
    return f"{differ} of {count} elements differ (max abs diff {biggest:.3g})"


def _kind(t: torch.Tensor) -> str:
    return f"{str(t.dtype).removeprefix('torch.')}{list(t.shape)}"
