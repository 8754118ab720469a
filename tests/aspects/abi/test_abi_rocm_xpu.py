"""abi reads ROCm's and XPU's torch libraries (issue 45 item 6): a torch built for ROCm ships libc10_hip.so and
libtorch_hip.so, one built for Intel GPUs libc10_xpu.so and libtorch_xpu.so, and their extensions link those.

Each test builds, with gcc, a stand-in for such a torch: a real venv whose `torch` distribution (its RECORD, as pip
writes it) holds `torch/lib/libc10_<api>.so` and `libtorch_<api>.so`, each exporting one symbol (beside a libc10.so), and two
extension packages linking all three, as ROCm's and XPU's extensions do: one needs only what they export (passes), one
also a symbol none exports (fails, named). No real torch is imported: the check reads files. Before the fix the
`_hip`/`_xpu` libraries were not read as torch's, so the good extension failed too, needing `c10::hip::tuc_stream()`.
"""

from __future__ import annotations

import shutil
import subprocess
import venv
from pathlib import Path

import pytest

from torch_upgrade_check.aspects.abi import host as abi
from torch_upgrade_check.aspects.imports import host as imports

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="no C compiler here to build the libraries")

SOURCE = 'extern void needed_{i}(void) __asm__("{symbol}");\n'
USE = "void tuc_use_{i}(void) {{ needed_{i}(); }}\n"
DEFINE = 'void tuc_defined(void) __asm__("{symbol}");\nvoid tuc_defined(void) {{}}\n'


def mangled(namespace: str, name: str) -> str:
    """`c10::hip::stream()` as the Itanium ABI spells it: _ZN3c103hip6streamEv."""
    parts = [*namespace.split("::"), name]
    return "_ZN" + "".join(f"{len(p)}{p}" for p in parts) + "Ev"


def gcc(out: Path, source: str, *flags: str) -> Path:
    src = out.with_suffix(".c")
    src.write_text(source)
    subprocess.run(["gcc", "-shared", "-fPIC", str(src), "-o", str(out), *flags], check=True, capture_output=True)
    src.unlink()
    return out


def dist_info(site: Path, name: str, version: str, files: list[str]) -> None:
    info = site / f"{name}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    rows = [*files, f"{info.name}/METADATA", f"{info.name}/RECORD"]
    (info / "RECORD").write_text("".join(f"{f},,\n" for f in rows))


def rocm_like_env(root: Path, api: str) -> tuple[str, dict[str, str]]:
    """A venv with a torch whose lib/ holds libc10_<api>.so and libtorch_<api>.so, and the extensions `tuc_good`
    (needs what they export) and `tuc_stale` (also needs a symbol they do not); its python and the symbols."""
    venv.create(root, with_pip=False, symlinks=True)
    site = next(root.glob("lib/python3*/site-packages"))
    lib = site / "torch" / "lib"
    lib.mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text("")
    symbols = {"core": mangled("c10", "tuc_core"), "c10": mangled(f"c10::{api}", "tuc_stream"),
               "torch": mangled(f"at::{api}", "tuc_malloc"), "gone": mangled(f"c10::{api}", "tuc_removed")}
    gcc(lib / "libc10.so", DEFINE.format(symbol=symbols["core"]))
    gcc(lib / f"libc10_{api}.so", DEFINE.format(symbol=symbols["c10"]))
    gcc(lib / f"libtorch_{api}.so", DEFINE.format(symbol=symbols["torch"]))
    dist_info(site, "torch", f"2.13.0+{api}", ["torch/__init__.py", "torch/lib/libc10.so",
                                               f"torch/lib/libc10_{api}.so",
                                               f"torch/lib/libtorch_{api}.so"])
    links = ["-Wl,--no-as-needed", f"-L{lib}", "-lc10", f"-lc10_{api}", f"-ltorch_{api}"]
    for package, needs in (("tuc_good", ["core", "c10", "torch"]), ("tuc_stale", ["core", "c10", "torch", "gone"])):
        (site / package).mkdir()
        (site / package / "__init__.py").write_text("")
        source = "".join(SOURCE.format(i=i, symbol=symbols[n]) + USE.format(i=i) for i, n in enumerate(needs))
        ext = gcc(site / package / "_ext.cpython-311-x86_64-linux-gnu.so", source, *links)
        dist_info(site, package.replace("_", "-"), "1.0", [f"{package}/__init__.py", f"{package}/{ext.name}"])
    return str(root / "bin" / "python"), symbols


@pytest.mark.parametrize("api", ["hip", "xpu"])
def test_an_extension_of_rocm_or_xpu_torch_is_checked_against_its_libraries(tmp_path: Path, api: str) -> None:
    python, symbols = rocm_like_env(tmp_path / "venv", api)
    listed = imports.listing(python)
    env = abi.Environment({d: (str(v["version"]), list(v["libraries"])) for d, v in listed.items()})
    assert sorted(p.name for p in env.torch_libraries()) == ["libc10.so", f"libc10_{api}.so", f"libtorch_{api}.so"]
    result = abi.check({"candidate": env}, device="cpu", repro="", labels={"candidate": f"2.13.0+{api}"})["candidate"]
    assert result.outcome.value == "failed" and result.metrics["extensions"] == 2, result.reason
    (missing,) = result.metrics["missing"].values()
    assert missing["distribution"] == "tuc-stale" and missing["mangled"] == [symbols["gone"]]  # the good one passed
    assert result.reason == (f"1 of 2 shared objects linking torch need symbols torch 2.13.0+{api} does not export: "
                             f"_ext.cpython-311-x86_64-linux-gnu.so (tuc-stale 1.0) needs c10::{api}::tuc_removed()")


def test_links_torch_counts_rocm_and_xpu_libraries() -> None:
    for stem in ("libc10_hip", "libtorch_hip", "libc10_xpu", "libtorch_xpu"):
        assert abi.links_torch(abi.Elf(needed=(f"{stem}.so", "libc.so.6"))), stem
