"""A local "nightly channel" of two REAL torch builds, for the canary's end-to-end test, built by the test itself.

`real_wheel(python, version, folder)` finds the wheel pip would install for `torch==version` (on a machine whose
pip finds wheels in local folders, that file itself; elsewhere, one `pip download --no-deps` into `folder`).
`relabel(wheel, version, folder)` writes a copy whose version alone is changed: the wheel's name, its dist-info
folder, METADATA's `Version:`, `torch/version.py`'s `__version__` and RECORD's hashes of those; every other file
(the libraries, git_version, the Python code) is the real build's, byte for byte.
`write_channel(folder, wheels)` writes a PEP 503 simple repository serving those wheels (symbolic links, so a
5.5 GB build is never copied) for `--index-url`, as PyTorch's nightly channel serves its builds.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
import subprocess
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from urllib.parse import unquote, urlparse

CHUNK = 1 << 20


def real_wheel(python: str, version: str, folder: Path) -> Path:
    """The wheel of torch==version this interpreter's pip would install (no dependencies)."""
    proc = subprocess.run([python, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--no-deps", "--quiet",
                           "--disable-pip-version-check", "--only-binary", ":all:", "--report", "-",
                           f"torch=={version}"], capture_output=True, text=True, check=True, timeout=600)
    url = json.loads(proc.stdout)["install"][0]["download_info"]["url"]
    if url.startswith("file://"):
        return Path(unquote(urlparse(url).path))
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run([python, "-m", "pip", "download", "--no-deps", "--quiet", "--disable-pip-version-check",
                    "--only-binary", ":all:", "-d", str(folder), f"torch=={version}"], check=True, timeout=1800)
    (found,) = folder.glob(f"torch-{version}*.whl")
    return found


def _digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def relabel(wheel: Path, version: str, folder: Path, added: Mapping[str, str] | None = None) -> Path:
    """A copy of `wheel` labelled `version` (its local label, like +cpu, kept); only the version's words change,
    and the files `added` (path in the wheel -> text) are added beside torch's, with RECORD rows of their own.
    Stored uncompressed: recompressing a torch build would take minutes, and an installer reads either."""
    old = wheel.name.split("-")[1]
    local = old.partition("+")[2]
    new = f"{version}+{local}" if local else version
    out = folder / wheel.name.replace(f"torch-{old}-", f"torch-{new}-", 1)
    folder.mkdir(parents=True, exist_ok=True)
    old_info, new_info = f"torch-{old}.dist-info/", f"torch-{new}.dist-info/"
    changed: dict[str, bytes] = {name: text.encode() for name, text in (added or {}).items()}
    with zipfile.ZipFile(wheel) as zin:
        version_py = zin.read("torch/version.py").decode()
        # torch's own label keeps its local part: PyPI's CUDA wheel 2.14.1 says 2.14.1+cu130, and so does its relabel
        label = re.search(r"(?m)^__version__ = '([^']*)'", version_py)[1]
        label = f"{version}+{label.partition('+')[2]}" if "+" in label else new
        changed["torch/version.py"] = re.sub(r"(?m)^__version__ = .*$", f"__version__ = '{label}'", version_py).encode()
        metadata = zin.read(old_info + "METADATA").decode()
        changed[new_info + "METADATA"] = re.sub(r"(?m)^Version: .*$", f"Version: {new}", metadata, count=1).encode()
        rows = []
        for row in zin.read(old_info + "RECORD").decode().splitlines():
            name, _, rest = row.partition(",")
            name = name.replace(old_info, new_info, 1)
            if name in changed:
                rest = f"{_digest(changed[name])},{len(changed[name])}"
            rows.append(f"{name},{rest}")
        rows[-1:-1] = [f"{name},{_digest(changed[name])},{len(changed[name])}" for name in added or {}]
        changed[new_info + "RECORD"] = ("\n".join(rows) + "\n").encode()
        with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED, allowZip64=True) as zout:
            for info in zin.infolist():
                name = info.filename.replace(old_info, new_info, 1)
                if name in changed:
                    zout.writestr(name, changed.pop(name))
                    continue
                entry = zipfile.ZipInfo(name, info.date_time)
                entry.external_attr = info.external_attr  # the executables stay executable
                with zin.open(info) as src, zout.open(entry, "w", force_zip64=info.file_size > 0x7FFF0000) as dst:
                    shutil.copyfileobj(src, dst, CHUNK)
            for name, data in changed.items():  # the added files
                zout.writestr(name, data)
    return out


BROKEN = '''"""torch-upgrade-check's tests: this build is broken as tests/harness/site/tuc_breakage.py breaks torch."""
import os
import sys

# site imports `sitecustomize` after the .pth files: the harness's, which installs TUC_BREAK's breakages once torch
# is imported (the workers this interpreter starts inherit TUC_BREAK, and read this .pth themselves)
sys.path.insert(0, {site!r})
os.environ["TUC_BREAK"] = {breaks!r}
'''


def broken_files(site: Path, breaks: str) -> dict[str, str]:
    """Files that break a build with the harness's sitecustomize: a .pth importing a module that puts it first on
    the path with TUC_BREAK=`breaks`, in every interpreter of the venv (as harness.interpreter() does for one)."""
    return {"_tuc_broken.pth": "import _tuc_broken\n", "_tuc_broken.py": BROKEN.format(site=str(site), breaks=breaks)}


def write_channel(folder: Path, wheels: Sequence[Path]) -> str:
    """Write (or rewrite) the index serving exactly `wheels`; returns its URL (file://.../simple)."""
    project = folder / "simple" / "torch"
    if project.exists():
        shutil.rmtree(project)
    project.mkdir(parents=True)
    links = []
    for wheel in wheels:
        (project / wheel.name).symlink_to(wheel.resolve())
        links.append(f'<a href="{wheel.name}">{wheel.name}</a><br>')
    (project / "index.html").write_text("<!DOCTYPE html>\n<html><body>\n" + "\n".join(links) + "\n</body></html>\n")
    (folder / "simple" / "index.html").write_text('<!DOCTYPE html>\n<html><body><a href="torch/">torch</a></body></html>\n')
    return (folder / "simple").as_uri()
