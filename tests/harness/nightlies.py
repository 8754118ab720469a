"""A local package index of torch "nightlies" for bisect's tests, built by the test itself.

`nightly_index(real_python, folder, versions, fault_from=4, drift=1e-3)` writes a PEP 503 simple
repository under `folder` (as pip and `bisect` read one over file://) with one small wheel per version,
named and tagged as PyTorch's nightlies are (`torch-2.14.0.dev20261114-cp311-cp311-linux_x86_64.whl`).
Each wheel holds no torch of its own: a .pth file puts the real torch's site-packages on the path and
imports a module that relabels it (`torch.__version__`, `torch.version.git_version`) and, from
`fault_from` on, injects the fault (benchmarks/inject.py: a slowdown or a numeric drift). So listing,
installing into the venv store, verifying the version and judging all run for real, with installs of
kilobytes instead of gigabytes. A version in `broken` gets a wheel that is not a zip: its install fails.
"""

from __future__ import annotations

import base64
import hashlib
import io
import subprocess
import sys
import zipfile
from collections.abc import Collection, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from inject import SITECUSTOMIZE

MODULE = '''"""torch-upgrade-check's tests: a real torch relabelled as {version}{fault_note}."""
import os

_saved = {{k: os.environ.get(k) for k in ("TUC_INJECT", "TUC_INJECT_SLOWDOWN", "TUC_INJECT_DRIFT")}}
os.environ.update(TUC_INJECT="1" if {on!r} else "0", TUC_INJECT_SLOWDOWN="{slowdown}", TUC_INJECT_DRIFT="{drift}")
try:
    exec(compile({inject!r}, "tuc-inject", "exec"))
finally:
    for _k, _v in _saved.items():
        if _v is None:
            os.environ.pop(_k, None)
        else:
            os.environ[_k] = _v

import torch

torch.__version__ = torch.version.__version__ = "{version}"
torch.version.git_version = "{git}"
'''


def wheel_tag() -> str:
    """The tag of a wheel this interpreter installs and `bisect` lists: this CPython, plain linux_<machine>."""
    import platform

    py = f"cp{sys.version_info.major}{sys.version_info.minor}"
    return f"{py}-{py}-linux_{platform.machine().lower()}"


def git_version(version: str) -> str:
    """A commit id per build, as torch.version.git_version gives one (40 hex digits)."""
    return hashlib.sha1(version.encode()).hexdigest()


def _wheel(version: str, site: str, module: str, tag: str) -> bytes:
    dist = f"torch-{version}.dist-info"
    files = {
        "tuc_nightly.pth": f"{site}\nimport _tuc_nightly\n",
        "_tuc_nightly.py": module,
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n",
        f"{dist}/WHEEL": f"Wheel-Version: 1.0\nGenerator: torch-upgrade-check-tests\nRoot-Is-Purelib: true\nTag: {tag}\n",
    }
    record = []
    for name, text in files.items():
        data = text.encode()
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    files[f"{dist}/RECORD"] = "\n".join([*record, f"{dist}/RECORD,,"]) + "\n"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    return buffer.getvalue()


def nightly_index(real_python: str, folder: Path, versions: Sequence[str], *, fault_from: int | None,
                  slowdown: float = 0.0, drift: float = 0.0, broken: Collection[str] = ()) -> str:
    """Write the index; returns its URL (file://.../simple) for --index-url."""
    site = subprocess.run([real_python, "-c", "import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    project = folder / "simple" / "torch"
    project.mkdir(parents=True, exist_ok=True)
    tag = wheel_tag()
    links = []
    for i, version in enumerate(versions):
        on = fault_from is not None and i >= fault_from
        note = f" (with slowdown {slowdown}, drift {drift})" if on else ""
        module = MODULE.format(version=version, fault_note=note, on=on, slowdown=slowdown if on else 0.0,
                               drift=drift if on else 0.0, inject=SITECUSTOMIZE, git=git_version(version))
        name = f"torch-{version}-{tag}.whl"
        data = b"not a zip: this build's install fails" if version in broken else _wheel(version, site, module, tag)
        (project / name).write_bytes(data)
        links.append(f'<a href="{name}#sha256={hashlib.sha256(data).hexdigest()}">{name}</a><br>')
    (project / "index.html").write_text("<!DOCTYPE html>\n<html><body>\n" + "\n".join(links) + "\n</body></html>\n")
    (folder / "simple" / "index.html").write_text('<!DOCTYPE html>\n<html><body><a href="torch/">torch</a></body></html>\n')
    return (folder / "simple").as_uri()
