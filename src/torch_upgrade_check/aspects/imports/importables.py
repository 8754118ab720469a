"""Run inside the environment under test (as a script; stdlib only, never imports torch): print, as JSON, every
installed distribution, the top-level modules it provides, its shared objects and its requirements (Requires-Dist),
read with importlib.metadata.

A distribution's modules are its `top_level.txt` when it has one (setuptools writes it), else the first part of
each path in its RECORD: a package folder holding an `__init__.py`, a `.py` file, or an extension module
(`name.cpython-311-x86_64-linux-gnu.so`). Left out: names that are not identifiers, private helpers starting
with `__` (editable-install finders), and namespace folders without `__init__.py` (importing one runs nothing).
"""

from __future__ import annotations

import importlib.metadata as metadata
import json
import sys

EXTENSIONS = (".so", ".pyd")
LIBRARIES = (".so", ".dylib")  # shared objects: Linux's and an extension module's everywhere, macOS's libraries


def modules_of(dist: metadata.Distribution) -> list[str]:
    top = dist.read_text("top_level.txt")
    if top:
        names = [line.strip().replace("/", ".").split(".")[0] for line in top.splitlines()]
    else:
        files = [str(f).replace("\\", "/") for f in dist.files or []]
        packages = {f.split("/")[0] for f in files if f.count("/") == 1 and f.endswith("/__init__.py")}
        singles = {f[:-3] for f in files if "/" not in f and f.endswith(".py")}
        extensions = {f.split(".")[0] for f in files if "/" not in f and f.endswith(EXTENSIONS)}
        names = sorted(packages | singles | extensions)
    return sorted({n for n in names if n.isidentifier() and not n.startswith("__")})


def libraries_of(dist: metadata.Distribution) -> list[str]:
    """The shared objects a distribution installed (`x.so`, `libfoo.so.1`, macOS's `libfoo.dylib`), as absolute
    paths."""
    files = [f for f in dist.files or [] if not str(f).startswith("..")]
    return sorted(str(dist.locate_file(f)) for f in files if f.name.endswith(LIBRARIES) or ".so." in f.name)


def main() -> None:
    found: dict[str, dict[str, object]] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if not name or name in found:  # the first on sys.path is the one imported
            continue
        found[name] = {"version": dist.version, "modules": modules_of(dist), "libraries": libraries_of(dist),
                       "requires": list(dist.requires or [])}  # Requires-Dist as written: the host reads them
    json.dump({"python": sys.version.split()[0], "distributions": found}, sys.stdout)


if __name__ == "__main__":
    main()
