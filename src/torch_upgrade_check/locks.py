"""The lock files teams commit -> pinned requirements, torch's pin for this runner included (no torch, no patterns).

Read with `tomllib`/`json` and `packaging` (stack.py hands each its parsed data):

- `uv.lock` (version 1), `poetry.lock` (lock-version 1.1, 2.x) and `pdm.lock` (lock_version 4.x) carry a
  dependency graph: every locked package is pinned to its version, except torch, the project itself, and what
  only torch needs (its own dependencies, which the candidate's torch brings in its own versions): those are the
  packages no other locked package reaches without going through torch.
- `pylock.toml` (PEP 751, lock-version 1.x; `uv export --format pylock.toml` writes one) and `Pipfile.lock`
  (pipfile-spec 6) carry no graph: every package whose marker holds here is pinned, torch's own dependencies too
  (they were locked with that side's torch, which is right when each side reads its own lock at its own ref).

torch itself is returned as `torch==VERSION`: the entry for this runner when the lock pins torch per platform
(markers evaluated by `packaging` in this interpreter's environment, the runner's), and a UsageError naming the
versions when more than one applies here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from packaging.markers import InvalidMarker, Marker, UndefinedComparison, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from torch_upgrade_check.errors import UsageError

UV_LOCK_VERSIONS = (1,)
POETRY_LOCK_VERSIONS = ("1.1", "2.0", "2.1")
PDM_LOCK_MAJOR = "4"
PYLOCK_MAJOR = "1"
PIPFILE_SPECS = (6,)
NAMES = ("uv.lock", "poetry.lock", "pdm.lock", "pylock.toml", "Pipfile.lock")


def is_lock(path: Path) -> bool:
    """Whether a file is one of the lock formats read here (`pylock.NAME.toml` too, as PEP 751 names them)."""
    name = path.name
    return name in NAMES or (name.startswith("pylock.") and name.endswith(".toml"))


def requirement(text: str, where: str, fix: str = "regenerate the lock") -> Requirement:
    """`text` as a requirement, or exit 2 naming `where` and `fix`."""
    try:
        return Requirement(text)
    except InvalidRequirement as e:
        raise UsageError(f"{where}: {text!r} is not a requirement pip would read ({' '.join(str(e).split())[:200]}); "
                         f"{fix}") from None


def applies_here(marker: Any, where: str) -> bool:
    """Whether a lock entry's marker holds on this runner (no marker: it always does)."""
    if marker is None or marker == "":
        return True
    texts = list(marker.values()) if isinstance(marker, Mapping) else [marker]  # poetry 2.1: a marker per group
    try:
        return any(Marker(str(t)).evaluate() for t in texts)
    except (InvalidMarker, UndefinedComparison, UndefinedEnvironmentName) as e:
        raise UsageError(f"{where}: marker {marker!r} is not one packaging reads ({e}); regenerate the lock") from None


def _locked(path: Path, packages: Any, table: str = "package") -> list[dict[str, Any]]:
    if not isinstance(packages, list) or not all(isinstance(p, dict) and "name" in p for p in packages):
        raise UsageError(f"{path}: its [[{table}]] entries are not what this lock format holds; regenerate the lock")
    return packages


def torch_pin(path: Path, entries: Iterable[tuple[str, bool]]) -> list[Requirement]:
    """`torch==VERSION` from a lock's torch entries, as (version, whether its marker holds here): [] without one."""
    found = [(v, here) for v, here in entries if v]
    if not found:
        return []
    versions = sorted({v for v, here in found if here})
    if not versions:
        raise UsageError(f"{path} pins torch {', '.join(sorted({v for v, _ in found}))} for other platforms only; "
                         "lock it for this runner's platform too, or pass the version instead of auto")
    if len(versions) > 1:
        raise UsageError(f"{path} pins torch {' and '.join(versions)} for this runner's platform; lock one, or pass "
                         "the version instead of auto")
    return [requirement(f"torch=={versions[0]}", str(path))]


def _pins(path: Path, packages: list[dict[str, Any]], deps: Mapping[str, set[str]], skip: set[str]) -> list[Requirement]:
    """name==version for each package some root reaches without going through torch (see the module docstring)."""
    names = {canonicalize_name(p["name"]) for p in packages}
    reached_by_someone = {d for ds in deps.values() for d in ds}
    roots = [n for n in names if n not in reached_by_someone and n != "torch"] + [n for n in skip if n in names]
    keep: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in keep or name == "torch":
            continue
        keep.add(name)
        todo += deps.get(name, ())
    versions: dict[str, set[str]] = {}
    for p in packages:
        versions.setdefault(canonicalize_name(p["name"]), set()).add(str(p.get("version", "")))
    reqs = []
    for name in sorted(keep - skip):
        found = sorted(v for v in versions.get(name, ()) if v)
        # a package locked at several versions (one per platform or Python) is left to the resolver
        reqs.append(requirement(f"{name}=={found[0]}" if len(found) == 1 else name, str(path)))
    return reqs


def _torch_entries(packages: list[dict[str, Any]], marker_key: str, where: str) -> list[tuple[str, bool]]:
    return [(str(p.get("version", "")), applies_here(p.get(marker_key), where))
            for p in packages if canonicalize_name(p["name"]) == "torch"]


def from_uv_lock(data: Mapping[str, Any], path: Path) -> list[Requirement]:
    version = data.get("version")
    if version not in UV_LOCK_VERSIONS:
        raise UsageError(f"{path}: uv.lock version {version!r} is not supported (this tool reads version "
                         f"{', '.join(map(str, UV_LOCK_VERSIONS))}); export it with 'uv export --format "
                         "requirements-txt' and pass that file")
    packages = _locked(path, data.get("package", []))
    deps: dict[str, set[str]] = {}
    projects: set[str] = set()
    torch_edges: list[tuple[str, bool]] = []
    for p in packages:
        name = canonicalize_name(p["name"])
        edges = [*p.get("dependencies", []),
                 *(d for group in (p.get("optional-dependencies") or {}).values() for d in group),
                 *(d for group in (p.get("dev-dependencies") or {}).values() for d in group)]
        edges = [d for d in edges if isinstance(d, dict) and "name" in d]
        deps.setdefault(name, set()).update(canonicalize_name(d["name"]) for d in edges)
        # an edge names the torch version only when the lock holds several: then its marker says which is whose
        torch_edges += [(str(d["version"]), applies_here(d.get("marker"), str(path)))
                        for d in edges if canonicalize_name(d["name"]) == "torch" and "version" in d]
        source = p.get("source") or {}
        if "editable" in source or "virtual" in source or source.get("directory") == ".":
            projects.add(name)  # the project itself (or a workspace member): its dependencies stay, it is not installed
    torch = [p for p in packages if canonicalize_name(p["name"]) == "torch"]
    entries = [(str(p.get("version", "")), True) for p in torch]
    if len(torch) > 1:  # one entry a platform (or index): the edges' markers, else each entry's resolution-markers
        entries = torch_edges or [(str(p.get("version", "")), any(applies_here(m, str(path))
                                                                  for m in p.get("resolution-markers") or [""]))
                                  for p in torch]
    return [*torch_pin(path, entries), *_pins(path, packages, deps, projects)]


def from_poetry_lock(data: Mapping[str, Any], path: Path) -> list[Requirement]:
    version = str((data.get("metadata") or {}).get("lock-version", ""))
    if version not in POETRY_LOCK_VERSIONS:
        raise UsageError(f"{path}: poetry.lock lock-version {version or 'missing'!r} is not supported (this tool reads "
                         f"{', '.join(POETRY_LOCK_VERSIONS)}); export it with 'poetry export -f requirements.txt' and "
                         "pass that file")
    packages = _locked(path, data.get("package", []))
    deps = {canonicalize_name(p["name"]): {canonicalize_name(d) for d in (p.get("dependencies") or {})}
            for p in packages}
    return [*torch_pin(path, _torch_entries(packages, "markers", str(path))), *_pins(path, packages, deps, set())]


def from_pdm_lock(data: Mapping[str, Any], path: Path) -> list[Requirement]:
    version = str((data.get("metadata") or {}).get("lock_version", ""))
    if version.split(".")[0] != PDM_LOCK_MAJOR:
        raise UsageError(f"{path}: pdm.lock lock_version {version or 'missing'!r} is not supported (this tool reads "
                         f"{PDM_LOCK_MAJOR}.x); export it with 'pdm export -o requirements.txt' and pass that file")
    packages = _locked(path, data.get("package", []))
    deps: dict[str, set[str]] = {}
    for p in packages:
        texts = p.get("dependencies") or []
        deps.setdefault(canonicalize_name(p["name"]), set()).update(
            canonicalize_name(requirement(str(t), f"{path} {p['name']}").name) for t in texts)
    return [*torch_pin(path, _torch_entries(packages, "marker", str(path))), *_pins(path, packages, deps, set())]


def _graphless(path: Path, entries: list[tuple[str, str, Any]]) -> list[Requirement]:
    """(name, version, marker) entries of a lock without a graph: torch's pin for here, then every other package
    whose marker holds here, pinned."""
    where = str(path)
    torch = [(v, applies_here(m, where)) for n, v, m in entries if canonicalize_name(n) == "torch"]
    kept: dict[str, set[str]] = {}
    for name, version, marker in entries:
        if canonicalize_name(name) != "torch" and applies_here(marker, where):
            kept.setdefault(canonicalize_name(name), set()).add(version)
    reqs = [requirement(f"{n}=={next(iter(vs))}" if len(vs) == 1 and "" not in vs else n, where)
            for n, vs in sorted(kept.items())]
    return [*torch_pin(path, torch), *reqs]


def from_pylock(data: Mapping[str, Any], path: Path) -> list[Requirement]:
    version = str(data.get("lock-version", ""))
    if version.split(".")[0] != PYLOCK_MAJOR:
        raise UsageError(f"{path}: PEP 751 lock-version {version or 'missing'!r} is not supported (this tool reads "
                         f"{PYLOCK_MAJOR}.x); export a requirements.txt and pass that file")
    packages = _locked(path, data.get("packages", []), "packages")
    entries = [(str(p["name"]), str(p.get("version", "")), p.get("marker")) for p in packages
               if "directory" not in p]  # a directory is the project itself (or a member): not installed here
    return _graphless(path, entries)


def from_pipfile_lock(data: Any, path: Path) -> list[Requirement]:
    meta = data.get("_meta") if isinstance(data, dict) else None
    spec = (meta or {}).get("pipfile-spec")
    if spec not in PIPFILE_SPECS:
        raise UsageError(f"{path}: pipfile-spec {spec!r} is not supported (this tool reads "
                         f"{', '.join(map(str, PIPFILE_SPECS))}); run 'pipenv lock' again, or 'pipenv requirements' "
                         "and pass that file")
    entries: list[tuple[str, str, Any]] = []
    for section in ("default", "develop"):
        for name, entry in (data.get(section) or {}).items():
            if not isinstance(entry, dict):
                raise UsageError(f"{path}: {section}.{name} is not a table of version, markers and hashes; run "
                                 "'pipenv lock' again")
            if entry.get("editable") or "path" in entry:
                continue  # the project itself (or a local folder): not from the index
            pinned = str(entry.get("version", ""))
            entries.append((name, pinned[2:] if pinned.startswith("==") else "", entry.get("markers")))
    return _graphless(path, entries)
