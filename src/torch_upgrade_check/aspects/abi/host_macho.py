"""What a Mach-O shared object (macOS: a `.dylib`, an extension's `.so`) needs and exports, for the `abi` check.

macholib reads the header and the load commands: the libraries a file needs are its LC_LOAD_DYLIB entries (weak,
re-exported and upward ones too), as `otool -L` lists them. The symbol table (LC_SYMTAB's `nlist` entries) is
unpacked in bulk with struct, as abi.py does for ELF: undefined external symbols (not weak references) are what
the file needs, external symbols defined in a section (not private externs) what it exports. Mach-O gives every
C symbol a leading underscore (`__ZN3c10…` for the C++ `_ZN3c10…`): it is taken off, so names read as ELF's.
A universal (fat) file holds a slice per architecture, and the Mac loads one: a file needs what any slice
needs and exports what every slice exports, so a slice that would fail is never hidden by another.
"""

from __future__ import annotations

import struct
from pathlib import Path

from macholib.mach_o import MH_CIGAM_64, MH_MAGIC_64
from macholib.MachO import MachO, MachOHeader

# the first four bytes of a thin Mach-O (32/64-bit, either byte order) and of a universal file (32/64-bit offsets)
MAGICS = frozenset({b"\xfe\xed\xfa\xce", b"\xce\xfa\xed\xfe", b"\xfe\xed\xfa\xcf", b"\xcf\xfa\xed\xfe",
                    b"\xca\xfe\xba\xbe", b"\xca\xfe\xba\xbf"})
N_STAB, N_PEXT, N_TYPE, N_EXT = 0xE0, 0x10, 0x0E, 0x01  # <mach-o/nlist.h>
N_UNDF, N_ABS, N_SECT, N_INDR = 0x0, 0x2, 0xE, 0xA
N_WEAK_REF = 0x0040


def is_macho(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(4) in MAGICS


def read(path: Path) -> tuple[tuple[str, ...], frozenset[str], frozenset[str]]:
    """(libraries needed, undefined symbols needed, symbols exported); OSError, ValueError or struct.error when
    the file is not a Mach-O macholib can read."""
    slices = [_slice(path, header) for header in MachO(str(path), allow_unknown_load_commands=True).headers]
    needed = tuple(dict.fromkeys(name for s in slices for name in s[0]))
    undefined = frozenset().union(*(s[1] for s in slices))
    defined = frozenset.intersection(*(s[2] for s in slices)) if slices else frozenset()
    return needed, undefined, defined


def _slice(path: Path, header: MachOHeader) -> tuple[tuple[str, ...], frozenset[str], frozenset[str]]:
    needed = tuple(name for _, _, name in header.walkRelocatables())
    symtab = header.getSymbolTableCommand()
    if symtab is None:
        return needed, frozenset(), frozenset()
    wide = header.MH_MAGIC in (MH_MAGIC_64, MH_CIGAM_64)
    row = header.endian + ("IBBHQ" if wide else "IBBHI")  # nlist_64 / nlist: strx, type, sect, desc, value
    with path.open("rb") as f:
        f.seek(header.offset + symtab.symoff)
        table = f.read(symtab.nsyms * struct.calcsize(row))
        f.seek(header.offset + symtab.stroff)
        strings = f.read(symtab.strsize)
    undefined, defined = set(), set()
    for strx, ntype, _, desc, value in struct.iter_unpack(row, table):
        if not strx or ntype & N_STAB or not ntype & N_EXT:
            continue
        name = strings[strx:strings.index(b"\0", strx)].decode("utf-8", "replace")
        name = name[1:] if name.startswith("_") else name
        kind = ntype & N_TYPE
        if kind == N_UNDF and not value:  # (a value is a common symbol's size: defined at load)
            if not desc & N_WEAK_REF:
                undefined.add(name)
        elif kind in (N_SECT, N_ABS, N_INDR) and not ntype & N_PEXT:
            defined.add(name)
    return needed, frozenset(undefined), frozenset(defined)
