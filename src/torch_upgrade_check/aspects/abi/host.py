"""The `abi` check: every shared object in an environment that links torch's libraries has its undefined symbols
checked against what that environment's torch exports (no torch here; ELF read with pyelftools, macOS's Mach-O
with macholib: see `macho`).

As pypa/auditwheel's lddtree does, a file's needs are its DT_NEEDED entries and its undefined dynamic symbols. A
shared object counts as an extension of torch when it needs libtorch, libtorch_cpu, libtorch_cuda, libtorch_python,
libc10 or libc10_cuda, or ROCm's libc10_hip / libtorch_hip, or XPU's libc10_xpu / libtorch_xpu (`.so` on Linux,
`.dylib` on macOS); those are torch's export set too. Its undefined global symbols that are torch's — mangled in
the c10, c10d, at, torch or caffe2 namespaces, or exported by the other side's torch — must be exported (defined,
global or weak, default or protected visibility) by one of the torch libraries of the environment; a missing one
fails, named demangled with the file and its distribution. This finds the break where no import would: an
extension loaded lazily, on first use.
pyelftools finds the sections; the symbol tables are unpacked in bulk with struct (libtorch_cpu's 75,000 symbols
one by one through pyelftools take seconds). A check that could read none of the files, or none of torch's own
libraries, or found no shared object linking torch, is skipped, saying which: never a pass on nothing compared.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import re
import struct
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile
from packaging.utils import canonicalize_name

from torch_upgrade_check.aspects.abi import host_macho as macho
from torch_upgrade_check.aspects.abi.judge import ASPECT, Missing, Scan, judge_sides
from torch_upgrade_check.aspects.imports import host as imports_host  # each side's distributions, listed once for both
from torch_upgrade_check.hostchecks.context import HostContext, Settings, said, wanted
from torch_upgrade_check.model import CheckResult, Side

# see lib_stem; ROCm's torch ships libc10_hip/libtorch_hip, Intel GPUs' libc10_xpu/libtorch_xpu, beside CUDA's
TORCH_LIBS = ("libtorch", "libtorch_cpu", "libtorch_cuda", "libtorch_python", "libc10", "libc10_cuda",
              "libc10_hip", "libtorch_hip", "libc10_xpu", "libtorch_xpu")
TORCH_DISTRIBUTION = "torch"
_TORCHISH = re.compile(r"^_Z(?:T[VIST])?NK?(?:3c10|4c10d|2at|5torch|6caffe2)")
SHN_UNDEF = 0
STB_GLOBAL, STB_WEAK = 1, 2
STV_DEFAULT, STV_PROTECTED = 0, 3


@dataclass(frozen=True)
class Elf:
    """What one shared object (ELF, or Mach-O read by `macho`) needs and offers."""

    needed: tuple[str, ...] = ()
    undefined: frozenset[str] = frozenset()  # global (not weak) undefined dynamic symbols
    defined: frozenset[str] = frozenset()  # exported dynamic symbols
    error: str = ""


def read_library(path: Path) -> Elf:
    """An ELF or Mach-O shared object, told apart by its first bytes."""
    try:
        if not macho.is_macho(path):
            return read_elf(path)
        needed, undefined, defined = macho.read(path)
    except (OSError, ValueError, struct.error) as e:
        return Elf(error=f"{type(e).__name__}: {e}")
    return Elf(needed, undefined, defined)


def lib_stem(name: str) -> str:
    """'libc10.so', 'libc10.so.2', 'libc10.dylib' and '@rpath/libc10.dylib' -> 'libc10'."""
    base = name.rsplit("/", 1)[-1]
    return base.split(".so")[0] if ".so" in base else base.removesuffix(".dylib")


def read_elf(path: Path) -> Elf:
    try:
        with path.open("rb") as f:
            elf = ELFFile(f)
            dynamic = elf.get_section_by_name(".dynamic")
            needed = tuple(t.needed for t in dynamic.iter_tags() if t.entry.d_tag == "DT_NEEDED") if dynamic else ()
            dynsym = elf.get_section_by_name(".dynsym")
            if dynsym is None:
                return Elf(needed)
            strings = elf.get_section(dynsym["sh_link"]).data()
            data = dynsym.data()
            end = "<" if elf.little_endian else ">"
            # Elf64_Sym: name, info, other, shndx, value, size; Elf32_Sym: name, value, size, info, other, shndx
            if elf.elfclass == 64:
                rows = ((n, i, o, s) for n, i, o, s, _, _ in struct.iter_unpack(end + "IBBHQQ", data))
            else:
                rows = ((n, i, o, s) for n, _, _, i, o, s in struct.iter_unpack(end + "IIIBBH", data))
            undefined, defined = set(), set()
            for name_at, info, other, shndx in rows:
                if not name_at:
                    continue
                bind = info >> 4
                name = strings[name_at:strings.index(b"\0", name_at)].decode("utf-8", "replace")
                if shndx == SHN_UNDEF:
                    if bind == STB_GLOBAL:
                        undefined.add(name)
                elif bind in (STB_GLOBAL, STB_WEAK) and other & 3 in (STV_DEFAULT, STV_PROTECTED):
                    defined.add(name)
    except (OSError, ELFError, struct.error, ValueError) as e:
        return Elf(error=f"{type(e).__name__}: {e}")
    return Elf(needed, frozenset(undefined), frozenset(defined))


def links_torch(elf: Elf) -> bool:
    return any(lib_stem(n) in TORCH_LIBS for n in elf.needed)


@lru_cache(maxsize=1)
def _cxa_demangle() -> Any:
    name = ctypes.util.find_library("stdc++")
    if not name:
        return None
    try:
        lib = ctypes.CDLL(name)
        fn = lib.__cxa_demangle
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_void_p
    fn.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
    return fn


def demangle(symbol: str) -> str:
    """The C++ name of a mangled symbol (libstdc++'s own __cxa_demangle), else the symbol as it is."""
    fn = _cxa_demangle()
    if fn is None or not symbol.startswith("_Z"):
        return symbol
    status = ctypes.c_int(0)
    out = fn(symbol.encode(), None, None, ctypes.byref(status))
    if status.value != 0 or not out:
        return symbol
    try:
        return ctypes.string_at(out).decode("utf-8", "replace")
    finally:
        ctypes.CDLL(None).free(ctypes.c_void_p(out))


@dataclass(frozen=True)
class Environment:
    """One side's shared objects: {distribution: (version, [paths])}, torch's among them."""

    libraries: Mapping[str, tuple[str, list[str]]] = field(default_factory=dict)

    def torch_libraries(self) -> list[Path]:
        _, paths = self.libraries.get(TORCH_DISTRIBUTION, ("", []))
        return [Path(p) for p in paths if lib_stem(Path(p).name) in TORCH_LIBS]

    def others(self) -> Iterable[tuple[str, str, Path]]:
        for dist, (version, paths) in sorted(self.libraries.items()):
            if dist != TORCH_DISTRIBUTION:
                for p in paths:
                    yield dist, version, Path(p)


def exports(env: Environment) -> tuple[frozenset[str], str]:
    """What the side's torch libraries export, and why none of them could be read ("" when one was: then the
    exports are known, else they would read as empty and every torch symbol as missing)."""
    found: set[str] = set()
    libs, errors = env.torch_libraries(), []
    for path in libs:
        lib = read_library(path)
        found |= lib.defined
        errors += [f"{path.name}: {lib.error}"] if lib.error else []
    why = "none of them is listed" if not libs else "; ".join(errors[:2]) if len(errors) == len(libs) else ""
    return frozenset(found), why


def stack_notes(envs: Mapping[str, Environment], removed: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """{side: {distribution: note}}: where the two sides' stacks differ, a candidate's distribution the baseline does
    not have is new in the candidate's stack, and a baseline's one the team's pull request removed says so."""
    if Side.BASELINE not in envs or Side.CANDIDATE not in envs:
        return {}
    base, cand = envs[Side.BASELINE].libraries, envs[Side.CANDIDATE].libraries
    return {Side.CANDIDATE: {d: ", new in the candidate's stack" for d in cand if d not in base},
            Side.BASELINE: {d: ", removed by the team's pull request" for d in base
                            if d not in cand and canonicalize_name(d) in removed}}


def scan(env: Environment, other_exports: frozenset[str] = frozenset()) -> Scan:
    """Every shared object of the side read: which link torch, and which need torch symbols it does not export."""
    offered: frozenset[str] | None = None
    count, total, missing, unreadable, why = 0, 0, [], [], ""
    for dist, version, path in env.others():
        total += 1
        elf = read_library(path)
        if elf.error:
            unreadable.append(f"{path} ({dist}): {elf.error}")
            continue
        if not links_torch(elf):
            continue
        count += 1
        if offered is None:
            offered, why = exports(env)  # only read when some extension links torch
        gone = sorted(s for s in elf.undefined if (_TORCHISH.match(s) or s in other_exports) and s not in offered)
        if gone:
            missing.append(Missing(dist, version, str(path), tuple(gone), tuple(demangle(g) for g in gone)))
    return Scan(count, missing, unreadable, total, why)


def check(envs: Mapping[str, Environment], *, device: str, repro: str, labels: Mapping[str, str],
          removed: Mapping[str, str] | None = None) -> dict[str, CheckResult]:
    """Each side's `stack[-]/abi` result: every side's shared objects read (the candidate's against the baseline's
    exports too), then judged (judge.judge_sides); `removed`: imports' removed_by_team."""
    started = time.monotonic()
    base_exports = exports(envs[Side.BASELINE])[0] if Side.BASELINE in envs else frozenset()
    scans, seconds = {}, {}
    for role, env in envs.items():
        scans[role] = scan(env, base_exports if role == Side.CANDIDATE else frozenset())
        seconds[role] = time.monotonic() - started
    return judge_sides(scans, stack_notes(envs, removed or {}), device=device, repro=repro, labels=labels,
                       seconds=seconds)


# The hooks commands/stack_checks reaches through the row (Stage.INSTALLED).

def planned(settings: Settings, only: Sequence[str]) -> bool:
    """With a stack (unless --only leaves abi out), or without one when --only asks for it."""
    return wanted(settings, only, ASPECT)


def on_host(context: HostContext) -> dict[str, CheckResult]:
    """Each side's abi result, from the distributions imports lists (read once for both: imports' `installed`)."""
    listings, removed = imports_host.installed(context)
    envs = {role: Environment({d: (str(v["version"]), list(v["libraries"])) for d, v in listings[role].items()})
            for role in context.pythons}
    results = check(envs, device=context.device, labels=context.labels, removed=removed,
                    repro=context.repro_of(ASPECT))
    return said(results, ASPECT, context.say)
