"""Real venvs for the stack checks' tests (imports, abi, the sides' stacks): torch and its dependencies linked from
this interpreter's site-packages, beside small packages built here that load native code through torch on import."""

from __future__ import annotations

import importlib.metadata as metadata
import subprocess
import venv
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

# an extension built for another torch needs OLD, which torch 2.13.0 no longer exports (it exports NOW): tests/aspects/abi
OLD = "_ZN3c1013MessageLoggerC1EPKcii"
NOW = "_ZN3c1013MessageLoggerC1ENS_14SourceLocationEib"
SOURCE = 'extern void needed(void) __asm__("{symbol}");\nvoid tuc_use(void) {{ needed(); }}\n'

PACKAGES = {
    # loads a native library through torch, as an extension loads its ops library
    "tuc_ext_load": "import os\nimport torch\n\n"
                    "torch.ops.load_library(os.path.join(os.path.dirname(torch.__file__), 'lib', 'libc10.so'))\n",
    # registers an operator, as a C++ extension's TORCH_LIBRARY block does when it loads
    "tuc_ext_ops": "import torch\n\n_lib = torch.library.Library('tuc_ext_ops', 'DEF')\n"
                   "_lib.define('twice(Tensor x) -> Tensor')\n",
}


def _torch_and_its_dependencies() -> list[metadata.Distribution]:
    found: dict[str, metadata.Distribution] = {}
    todo = ["torch"]
    while todo:
        name = canonicalize_name(todo.pop())
        if name in found:
            continue
        try:
            found[name] = dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return list(found.values())


def build_env(folder: Path, packages: dict[str, str] = PACKAGES, files: dict[str, Path] | None = None) -> Path:
    """A real venv whose site-packages holds torch and its dependencies (linked from this interpreter's) and the
    packages given (name -> __init__.py, and name -> a file it ships beside it), each with its .dist-info, as pip
    would have installed them."""
    venv.create(folder, with_pip=False, symlinks=True)
    site = next(folder.glob("lib/python3*/site-packages"))
    for dist in _torch_and_its_dependencies():
        for top in sorted({str(f).split("/")[0] for f in dist.files or [] if not str(f).startswith("..")}):
            if top != "__pycache__" and not (site / top).exists():
                (site / top).symlink_to(dist.locate_file(top))
    for name, code in packages.items():
        (site / name).mkdir()
        (site / name / "__init__.py").write_text(code)
        shipped = [f"{name}/__init__.py"]
        if files and name in files:
            (site / name / files[name].name).write_bytes(files[name].read_bytes())
            shipped.append(f"{name}/{files[name].name}")
        info = site / f"{name}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: 1.0\n")
        (info / "RECORD").write_text("".join(f"{f},,\n" for f in [*shipped, f"{info.name}/METADATA", f"{info.name}/RECORD"]))
    return folder / "bin" / "python"


def torch_lib() -> Path:
    return Path(str(metadata.distribution("torch").locate_file("torch/lib")))


def build_extension(folder: Path, name: str, symbol: str, *, links_torch: bool = True) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.c").write_text(SOURCE.format(symbol=symbol))
    out = folder / f"_{name}.cpython-311-x86_64-linux-gnu.so"
    linked = ["-Wl,--no-as-needed", f"-L{torch_lib()}", "-lc10"] if links_torch else ["-Wl,--allow-shlib-undefined"]
    subprocess.run(["gcc", "-shared", "-fPIC", str(folder / f"{name}.c"), "-o", str(out), *linked], check=True,
                   capture_output=True)
    return out
