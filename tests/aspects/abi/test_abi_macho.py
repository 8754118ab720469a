"""The abi check on macOS: Mach-O files (torch's `.dylib`s, extensions' `.so`s), built here from bytes, read for real.

Before this fix a Mach-O file was `unreadable` (pyelftools reads ELF only), torch's `.dylib` files were not even
listed, and the check passed: "no shared object here links torch's libraries", having read nothing. The files
here are what Apple's linker writes for a dylib and a bundle, cut to what the check reads: the header, the
`LC_ID_DYLIB`/`LC_LOAD_DYLIB` commands and an `LC_SYMTAB` of `nlist_64` entries, whose C++ names carry the
leading underscore Mach-O adds (`__ZN3c10…`). A universal (fat) file holds two slices.
"""

from __future__ import annotations

import importlib.metadata as metadata
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from torch_upgrade_check.aspects.abi import host as abi
from torch_upgrade_check.aspects.imports import importables
from torch_upgrade_check.model import Outcome

OLD = "_ZN3c1013MessageLoggerC1EPKcii"  # c10::MessageLogger::MessageLogger(char const*, int, int): torch before 2.x
NOW = "_ZN3c1013MessageLoggerC1ENS_14SourceLocationEib"  # (c10::SourceLocation, int, bool): torch 2.13.0's
ARM64, X86_64 = 0x0100000C, 0x01000007
MH_DYLIB, MH_BUNDLE = 6, 8
LC_SYMTAB, LC_LOAD_DYLIB, LC_ID_DYLIB, LC_LOAD_WEAK_DYLIB = 0x2, 0xC, 0xD, 0x80000018
N_UNDF_EXT, N_SECT_EXT, N_SECT_PRIVATE_EXT = 0x01, 0x0F, 0x1F
N_WEAK_REF = 0x40


def _dylib_command(cmd: int, name: str) -> bytes:
    raw = name.encode() + b"\0"
    raw += b"\0" * (-(24 + len(raw)) % 8)  # load commands are 8-byte aligned in 64-bit files
    return struct.pack("<IIIIII", cmd, 24 + len(raw), 24, 2, 0x10000, 0x10000) + raw


def macho(*, filetype: int = MH_BUNDLE, install_name: str = "", needed: tuple[str, ...] = (),
          weak_needed: tuple[str, ...] = (), symbols: tuple[tuple[str, int, int], ...] = (), cpu: int = ARM64) -> bytes:
    """A thin 64-bit little-endian Mach-O: `symbols` are (C name, n_type, n_desc); Mach-O prefixes each with '_'."""
    commands = [_dylib_command(LC_ID_DYLIB, install_name)] if install_name else []
    commands += [_dylib_command(LC_LOAD_DYLIB, n) for n in needed]
    commands += [_dylib_command(LC_LOAD_WEAK_DYLIB, n) for n in weak_needed]
    strings, entries = b"\0", b""
    for name, ntype, desc in symbols:
        entries += struct.pack("<IBBHQ", len(strings), ntype, 1 if ntype & 0x0E else 0, desc,
                               0x4000 if ntype & 0x0E else 0)
        strings += b"_" + name.encode() + b"\0"
    size_of_commands = sum(map(len, commands)) + 24
    symoff = 32 + size_of_commands
    stroff = symoff + len(entries)
    commands.append(struct.pack("<IIIIII", LC_SYMTAB, 24, symoff, len(symbols), stroff, len(strings)))
    header = struct.pack("<IiiIIIII", 0xFEEDFACF, cpu, 0, filetype, len(commands), size_of_commands, 0x85, 0)
    return header + b"".join(commands) + entries + strings


def fat(*slices: tuple[int, bytes]) -> bytes:
    """A universal binary: big-endian fat header, each (cputype, slice) at a 4096-aligned offset."""
    out, at, body = struct.pack(">II", 0xCAFEBABE, len(slices)), 4096, b""
    for cpu, data in slices:
        out += struct.pack(">iiIII", cpu, 0, at + len(body), len(data), 12)
        body += data + b"\0" * (-len(data) % 4096)
    return out + b"\0" * (at - len(out)) + body


def libc10(exported: str = NOW) -> bytes:
    return macho(filetype=MH_DYLIB, install_name="@rpath/libc10.dylib", needed=("/usr/lib/libc++.1.dylib",),
                 symbols=((exported, N_SECT_EXT, 0), ("c10_private_helper", N_SECT_PRIVATE_EXT, 0)))


def extension(symbol: str) -> bytes:
    return macho(needed=("@rpath/libc10.dylib", "/usr/lib/libSystem.B.dylib"),
                 symbols=((symbol, N_UNDF_EXT, 0x0100), ("optional_hook", N_UNDF_EXT, N_WEAK_REF),
                          ("PyInit__C", N_SECT_EXT, 0)))


def environment(tmp_path: Path, files: dict[str, bytes]) -> abi.Environment:
    """torch's libc10.dylib and the files of a distribution `tuc-ext`, as the lister reports them."""
    paths = {}
    for name, data in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(data)
        paths[name] = str(tmp_path / name)
    torch = [p for n, p in paths.items() if n.startswith("torch/")]
    return abi.Environment({"torch": ("2.13.0", torch), "tuc-ext": ("1.0", [p for p in paths.values() if p not in torch])})


@pytest.mark.skipif(shutil.which("llvm-nm") is None, reason="no llvm-nm here to read the test's Mach-O files")
def test_the_files_written_here_are_mach_o_as_llvm_reads_them(tmp_path: Path) -> None:
    """The oracle, independent of macholib: LLVM's own Mach-O reader sees the symbols the test meant."""
    (tmp_path / "_C.so").write_bytes(fat((X86_64, extension(OLD)), (ARM64, extension(NOW))))
    out = subprocess.run(["llvm-nm", "-m", "--arch=arm64", str(tmp_path / "_C.so")], capture_output=True, text=True,
                         check=True).stdout
    assert f"(undefined) external _{NOW} (from libc10)" in out and "(undefined) weak external _optional_hook" in out
    assert "external _PyInit__C" in out and OLD not in out


def test_a_mach_o_file_is_read_for_its_needs_and_exports(tmp_path: Path) -> None:
    (tmp_path / "_C.so").write_bytes(extension(OLD))
    ext = abi.read_library(tmp_path / "_C.so")
    assert not ext.error, ext.error
    assert ext.needed == ("@rpath/libc10.dylib", "/usr/lib/libSystem.B.dylib") and abi.links_torch(ext)
    assert ext.undefined == {OLD}  # the weak reference may be missing at load; the leading '_' is Mach-O's, not C's
    assert ext.defined == {"PyInit__C"}
    (tmp_path / "libc10.dylib").write_bytes(libc10())
    assert abi.read_library(tmp_path / "libc10.dylib").defined == {NOW}  # a private extern is not exported


def test_an_extension_needing_a_symbol_torch_does_not_export_fails_on_macos(tmp_path: Path) -> None:
    stale = environment(tmp_path / "stale", {"torch/lib/libc10.dylib": libc10(), "tuc_ext/_C.cpython-311-darwin.so":
                                             extension(OLD)})
    good = environment(tmp_path / "good", {"torch/lib/libc10.dylib": libc10(), "tuc_ext/_C.cpython-311-darwin.so":
                                           extension(NOW)})
    results = abi.check({"baseline": good, "candidate": stale}, device="cpu", repro="",
                        labels={"baseline": "2.13.0", "candidate": "2.13.0"})
    assert results["baseline"].outcome is Outcome.PASSED and results["baseline"].metrics["extensions"] == 1
    cand = results["candidate"]
    assert cand.outcome is Outcome.FAILED, cand.reason
    assert cand.reason.endswith("_C.cpython-311-darwin.so (tuc-ext 1.0) needs "
                                "c10::MessageLogger::MessageLogger(char const*, int, int)"), cand.reason
    aa = abi.check({"baseline": good, "candidate": good}, device="cpu", repro="", labels={"candidate": "2.13.0"})
    assert aa["candidate"].outcome is Outcome.PASSED and aa["candidate"].metrics["extensions"] == 1


def test_a_universal_binary_needs_what_any_slice_needs(tmp_path: Path) -> None:
    """A slice's needs count whichever slice the Mac loads: the x86_64 slice of this extension is stale."""
    env = environment(tmp_path, {"torch/lib/libc10.dylib": fat((X86_64, libc10()), (ARM64, libc10())),
                                 "tuc_ext/_C.so": fat((X86_64, extension(OLD)), (ARM64, extension(NOW)))})
    result = abi.check({"candidate": env}, device="cpu", repro="", labels={"candidate": "2.13.0"})["candidate"]
    assert result.outcome is Outcome.FAILED and "MessageLogger(char const*, int, int)" in result.reason, result.reason


def test_nothing_read_is_a_skip_that_says_so(tmp_path: Path) -> None:
    env = environment(tmp_path, {"torch/lib/libc10.dylib": libc10(), "tuc_ext/_C.so": b"MZ\x90\0 not ELF or Mach-O"})
    result = abi.check({"candidate": env}, device="cpu", repro="", labels={"candidate": "2.13.0"})["candidate"]
    assert result.outcome is Outcome.SKIPPED, result.reason
    assert result.reason.startswith("none of the 1 shared objects here could be read"), result.reason
    assert "_C.so" in result.reason
    # an extension read, its torch not: never "torch does not export" what was never read
    env = environment(tmp_path / "t", {"torch/lib/libc10.dylib": b"garbage", "tuc_ext/_C.so": extension(NOW)})
    result = abi.check({"candidate": env}, device="cpu", repro="", labels={"candidate": "2.13.0"})["candidate"]
    assert result.outcome is Outcome.SKIPPED, result.reason
    assert result.reason.startswith("torch 2.13.0's own libraries could not be read"), result.reason


def test_the_lister_names_torchs_dylibs(tmp_path: Path) -> None:
    info = tmp_path / "torch-2.13.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.13.0\n")
    (info / "RECORD").write_text("torch/lib/libc10.dylib,,\ntorch/_C.cpython-311-darwin.so,,\ntorch/__init__.py,,\n"
                                 "torch/lib/libc10.so.2,,\n")
    found = importables.libraries_of(metadata.PathDistribution(info))
    assert [Path(p).name for p in found] == ["_C.cpython-311-darwin.so", "libc10.dylib", "libc10.so.2"]
