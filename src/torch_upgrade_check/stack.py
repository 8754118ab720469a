"""The team's stack: requirements files, pyproject.toml and lock files -> requirements for both venvs (no torch).

Read with `packaging` (every requirement) and `tomllib` (every TOML file), never with patterns: a line pip
would reject is an error here too, naming the file and the line. The team's own torch requirement is set
aside (`Stack.torch`): each side pins its own torch, and the stack is installed beside it.

- `requirements*.txt` (any `.txt`/`.in`): one requirement a line, `#` comments, `\\` continuations, `-r FILE`
  (relative to the file), `--hash` options (dropped). Options that change where packages come from
  (`-i`, `--extra-index-url`, `-f`, `-e`, `-c`, ...) are refused with the tool's flag to use instead.
- `pyproject.toml`: `[project] dependencies`, and for each name in `--extras` its
  `[project.optional-dependencies]` group or PEP 735 `[dependency-groups]` group (references to the
  project's own extras and `include-group` are followed).
- `uv.lock`, `poetry.lock`, `pdm.lock`, `pylock.toml` (PEP 751) and `Pipfile.lock`: read by locks.py, which
  says what each pins; torch's pin for this runner is kept apart (`Stack.locked`), and decides `auto` over a
  project file's range.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from torch_upgrade_check import locks
from torch_upgrade_check.errors import UsageError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

Reader = Callable[[Path], str]
KINDS = "a requirements*.txt, a pyproject.toml, a uv.lock, a poetry.lock, a pdm.lock, a pylock.toml or a Pipfile.lock"
# requirements-file options that change where packages come from: the tool's own flag says it for both sides
REFUSED = {"-i": "--index-url", "--index-url": "--index-url", "--extra-index-url": "--extra-index-url",
           "-f": "--find-links", "--find-links": "--find-links", "--pre": "a version range naming the pre-release",
           "-e": "a requirement by name (name @ URL for a fork)", "--editable": "a requirement by name (name @ URL for a fork)",
           "-c": "the pins as requirements", "--constraint": "the pins as requirements",
           "--no-index": "--find-links", "--trusted-host": "an https index URL"}


class Absent(UsageError):
    """A stack file that does not exist (in the working tree, or at a git ref): one side of a pull request may
    add or remove a file the other has, and `load(..., absent_ok=True)` records it rather than failing."""


@dataclass(frozen=True)
class Stack:
    """What a venv gets beside torch: requirement strings in file order, and where they came from."""

    requirements: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    torch: tuple[str, ...] = ()  # the team's own torch requirements, set aside (each side pins its own)
    absent: tuple[str, ...] = ()  # files asked for that this side does not have (load's absent_ok), as given
    locked: tuple[tuple[str, str], ...] = ()  # (lock file as given, the torch version it pins for this runner)

    def __bool__(self) -> bool:
        return bool(self.sources or self.absent)


def load(paths: Sequence[str | Path], extras: Sequence[str] = (), *, base: Path | None = None,
         read: Reader | None = None, absent_ok: bool = False) -> Stack:
    """Read every file (relative to `base`, else the current folder); all problems raised together as one UsageError.
    With `absent_ok`, a file that does not exist is listed in `Stack.absent` (its reason) instead of a problem;
    a `-r` include that does not exist is still one (the file that names it is there)."""
    problems: list[str] = []
    absent: list[str] = []
    reqs: list[Requirement] = []
    sources: list[str] = []
    locked: list[tuple[str, str]] = []
    wanted = tuple(dict.fromkeys(e.strip() for item in extras for e in item.split(",") if e.strip()))
    if wanted and not any(Path(p).name == "pyproject.toml" for p in paths):
        problems.append(f"--extras {','.join(wanted)} names groups of a pyproject.toml, and no --requirements file is "
                        "one; pass the pyproject.toml too, or drop --extras")
    for given in paths:
        path = (base / given) if base is not None and not Path(given).is_absolute() else Path(given)
        try:
            found = read_file(path, wanted, read)
            reqs += found
            sources.append(str(given))
            if locks.is_lock(path):  # a lock's torch is a pin (torch==X): it decides auto over a project file's range
                locked += [(str(given), str(r.specifier)[2:]) for r in found if canonicalize_name(r.name) == "torch"]
        except Absent as e:
            if not absent_ok:
                problems += e.problems
            absent.append(str(given))
        except UsageError as e:
            problems += e.problems
    if problems:
        raise UsageError(*problems)
    kept: dict[str, Requirement] = {}
    torch: list[str] = []
    for req in reqs:
        if canonicalize_name(req.name) == "torch":
            torch.append(str(req))
        else:
            kept.setdefault(str(req), req)  # the same line in two files once
    return Stack(tuple(kept), tuple(sources), tuple(torch), tuple(absent), tuple(locked))


def read_file(path: Path, extras: Sequence[str] = (), read: Reader | None = None) -> list[Requirement]:
    """The requirements of one file, by its kind; a UsageError naming the file and the fix when it cannot.
    `read` gives a file's text (default: from disk; `at_ref` reads them as a git commit has them); it raises
    Absent for a file that does not exist."""
    read = read or _read
    name = path.name
    if name == "pyproject.toml":
        return from_pyproject(_toml(path, read), path, extras)
    if name == "uv.lock":
        return locks.from_uv_lock(_toml(path, read), path)
    if name == "poetry.lock":
        return locks.from_poetry_lock(_toml(path, read), path)
    if name == "pdm.lock":
        return locks.from_pdm_lock(_toml(path, read), path)
    if name == "Pipfile.lock":
        return locks.from_pipfile_lock(_json(path, read), path)
    if locks.is_lock(path):
        return locks.from_pylock(_toml(path, read), path)
    if path.suffix in (".txt", ".in"):
        return from_requirements_txt(path, read=read)
    raise UsageError(f"requirements file {path} is not {KINDS}; pass one of those (pipenv lock writes a "
                     "Pipfile.lock from a Pipfile; pip-compile a requirements.txt from a requirements.in)")


def _read(path: Path) -> str:
    if not path.exists():
        raise Absent(f"requirements file {path} not found; pass the path of {KINDS} (relative to the current "
                         "folder, or to the config file for its 'requirements:')")
    if path.is_dir():
        raise UsageError(f"requirements file {path} is a folder; pass the path of {KINDS} in it")
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"cannot read requirements file {path}: {' '.join(str(e).split())}; make it a readable "
                         "UTF-8 file") from None


def _toml(path: Path, read: Reader) -> dict[str, Any]:
    try:
        return tomllib.loads(read(path))
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"{path}: invalid TOML: {e}; fix the file (it must load with Python's tomllib)") from None


def _json(path: Path, read: Reader) -> Any:
    try:
        return json.loads(read(path))
    except json.JSONDecodeError as e:
        raise UsageError(f"{path}: invalid JSON: {e}; fix the file (run the tool that writes it again)") from None


def _requirement(text: str, where: str) -> Requirement:
    return locks.requirement(text, where, "write it as 'name', 'name==1.2' or 'name @ URL'")


def _logical_lines(text: str) -> Iterable[tuple[int, str]]:
    """(first line number, line) with `\\` continuations joined and comments dropped, as pip reads them."""
    start, parts = 0, []
    for number, raw in enumerate(text.splitlines(), 1):
        if not parts:
            start = number
        line = raw
        if line.lstrip().startswith("#"):
            line = ""
        elif " #" in line or "\t#" in line:
            line = line[: min(i for i in (line.find(" #"), line.find("\t#")) if i >= 0)]
        if line.endswith("\\"):
            parts.append(line[:-1])
            continue
        parts.append(line)
        joined = " ".join(p.strip() for p in parts).strip()
        parts = []
        if joined:
            yield start, joined


def from_requirements_txt(path: Path, seen: tuple[Path, ...] = (), read: Reader | None = None) -> list[Requirement]:
    read = read or _read
    text = read(path)
    if path.resolve() in seen:
        raise UsageError(f"{seen[-1]}: '-r {path}' includes a file already being read (a loop); remove one of the -r lines")
    reqs: list[Requirement] = []
    for number, line in _logical_lines(text):
        where = f"{path}:{number}"
        words = line.split()
        first = words[0]
        option = first.split("=", 1)[0]
        if option in ("-r", "--requirement"):
            target = first.split("=", 1)[1] if "=" in first else (words[1] if len(words) > 1 else "")
            if not target:
                raise UsageError(f"{where}: {first} needs a file name; write '-r other-requirements.txt'")
            try:
                reqs += from_requirements_txt(path.parent / target, (*seen, path.resolve()), read)
            except Absent as e:  # the file that names it is there: an include it lacks is that file's mistake
                raise UsageError(f"{where}: {' '.join(e.problems)}") from None
            continue
        if option.startswith("-"):
            instead = REFUSED.get(option)
            fix = f"pass {instead} to torch-upgrade-check instead" if instead else "remove it"
            raise UsageError(f"{where}: option {option} is not supported in a stack's requirements; {fix}")
        # per-requirement options (--hash=...) follow the requirement, as pip splits them
        cut = next((i for i, w in enumerate(words) if w.startswith("-")), len(words))
        bad = [w.split("=", 1)[0] for w in words[cut:] if w.startswith("-") and not w.startswith("--hash")]
        if bad:
            raise UsageError(f"{where}: option {bad[0]} is not supported after a requirement; remove it")
        kept = words[:cut]
        reqs.append(_requirement(" ".join(kept), where))
    return reqs


def from_pyproject(data: Mapping[str, Any], path: Path, extras: Sequence[str]) -> list[Requirement]:
    project = data.get("project")
    if not isinstance(project, dict):
        raise UsageError(f"{path} has no [project] table (PEP 621); pass the lock file (poetry.lock, uv.lock) or a "
                         "requirements.txt instead")
    if "dependencies" in (project.get("dynamic") or []):
        raise UsageError(f"{path}: its dependencies are dynamic (computed by the build backend); pass a "
                         "requirements.txt or lock file instead")
    own = canonicalize_name(str(project.get("name", "")))
    optional = project.get("optional-dependencies") or {}
    groups = data.get("dependency-groups") or {}
    available = sorted({*optional, *groups})
    unknown = [e for e in extras if e not in optional and e not in groups]
    if unknown:
        raise UsageError(f"{path}: no optional-dependencies or dependency-groups named {', '.join(unknown)}; "
                         f"--extras can name {', '.join(available) or 'nothing here (the file has none)'}")
    where = f"{path} [project] dependencies"
    reqs = [_requirement(str(t), where) for t in project.get("dependencies") or []]
    todo, done = list(extras), set()
    while todo:
        name = todo.pop(0)
        if name in done:
            continue
        done.add(name)
        if name in optional:
            for text in optional[name]:
                req = _requirement(str(text), f"{path} optional-dependencies.{name}")
                if canonicalize_name(req.name) == own and own:  # `myproject[test]`: the project's own extras
                    todo += sorted(req.extras)
                else:
                    reqs.append(req)
        for item in groups.get(name, []):
            if isinstance(item, dict) and "include-group" in item:
                todo.append(str(item["include-group"]))
            else:
                reqs.append(_requirement(str(item), f"{path} dependency-groups.{name}"))
    return reqs


def requested(cfg: Any, requirements: Sequence[str], extras: Sequence[str], read: Reader | None = None, *,
              absent_ok: bool = False) -> Stack:
    """The stack `compare`'s flags and config (`cfg`, a config.Config or None) ask for: the config's `requirements:`
    (relative to its folder), then each --requirements (relative to the current folder); the config's `extras:` and
    --extras together."""
    paths: list[str | Path] = [cfg.root / p for p in cfg.requirements] if cfg is not None else []
    paths += list(requirements)
    extras = [*(cfg.extras if cfg is not None else ()), *extras]
    return load(paths, extras, read=read, absent_ok=absent_ok) if paths or extras else Stack()


def at_ref(ref: str, flag: str) -> Reader:
    """A reader of files as git commit `ref` has them (`git show REF:./path`, paths relative to the current folder);
    a ref that is not a commit here is a UsageError naming it, before any file is read."""
    try:
        proc = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], capture_output=True,
                              text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise UsageError(f"{flag} {ref} needs git in a checkout of the repository: {e}") from None
    if proc.returncode != 0:
        raise UsageError(f"{flag} {ref!r} is not a commit in this repository; fetch it (actions/checkout with "
                         "fetch-depth: 0, or 2 for a pull request's merge commit) or name a branch, tag or SHA that exists")

    def read(path: Path) -> str:
        where = "./" + os.path.relpath(path).replace(os.sep, "/")
        shown = subprocess.run(["git", "show", f"{ref}:{where}"], capture_output=True, timeout=60, check=False)
        if shown.returncode != 0:
            raise Absent(f"requirements file {path} does not exist at {flag} {ref}; pass the files both sides have, "
                             "or a VERSION instead of auto")
        return shown.stdout.decode("utf-8", "replace")

    return read


def torch_spec(found: Stack, where: str) -> str:
    """The torch the stack pins, as a compare SPEC: `2.13.0` for `torch==2.13.0`, the range for a range; a lock
    file's pin decides over a project file's range (which must accept it)."""
    if found.locked:
        return _locked_pin(found, where)
    specs = sorted({str(Requirement(t).specifier) for t in found.torch})
    if not specs or specs == [""]:
        raise UsageError(f"no torch requirement with a version in {', '.join(found.sources) or 'no file'} {where}; pin "
                         "torch there (torch==2.13.0) or pass the version instead of auto")
    if len(specs) > 1:
        raise UsageError(f"the stack {where} asks torch{' and torch'.join(specs)}; keep one torch requirement, or pass "
                         "the version instead of auto")
    spec = specs[0]
    return spec[2:] if spec.startswith("==") and "," not in spec and "*" not in spec else spec


def _locked_pin(found: Stack, where: str) -> str:
    """The one torch version the stack's lock files pin, checked against every torch range the other files ask."""
    pins = sorted({version for _, version in found.locked})
    if len(pins) > 1:
        named = ", ".join(f"{path} pins torch {version}" for path, version in found.locked)
        raise UsageError(f"the stack's lock files {where} disagree: {named}; lock them again from one project, or pass "
                         "the version instead of auto")
    pin = pins[0]
    for text in found.torch:
        req = Requirement(text)
        if not req.specifier.contains(pin, prereleases=True):
            lock = found.locked[0][0]
            raise UsageError(f"{lock} {where} pins torch {pin}, which the stack's {req} excludes: the lock is stale; "
                             "lock again (uv lock, poetry lock, pdm lock, pipenv lock), or pass the version instead of auto")
    return pin
