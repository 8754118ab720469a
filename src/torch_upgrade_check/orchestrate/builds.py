"""Which torch builds lie between a good and a bad one: versions ordered as PEP 440 orders them, listed
from a package index (PEP 503 simple pages, over https:// or file://) or from a file (no torch here).

Nightlies are versions like `2.14.0.dev20261115`: their date is in the version, and the index has one a
day. Listing keeps only the wheels this interpreter can install (its cpXY tag and platform).
"""

from __future__ import annotations

import datetime as dt
import html.parser
import platform
import re
import sys
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from torch_upgrade_check.errors import UsageError

_VERSION = re.compile(r"^(\d+(?:\.\d+)*)(?:(a|b|rc)(\d+))?(?:\.post(\d+))?(?:\.dev(\d+))?(?:\+([\w.]+))?$")
_WHEEL = re.compile(r"^torch-(?P<version>[^-]+)-(?P<py>[^-]+)-(?P<abi>[^-]+)-(?P<plat>[^-]+)\.whl$")
_PRE = {"a": 0, "b": 1, "rc": 2}


def sort_key(version: str) -> tuple:
    """PEP 440 order for the forms torch uses: release, aN/bN/rcN, .postN, .devN, +local (ignored in order)."""
    m = _VERSION.match(version.strip())
    if not m:
        raise ValueError(f"not a version: {version!r}")
    release = tuple(int(x) for x in m.group(1).split("."))
    release += (0,) * (4 - len(release))
    pre = (_PRE[m.group(2)], int(m.group(3))) if m.group(2) else (3, 0)  # a final release sorts after its pre-releases
    post = int(m.group(4)) if m.group(4) is not None else -1
    dev = int(m.group(5)) if m.group(5) is not None else float("inf")  # a dev build sorts before what it precedes
    if m.group(5) is not None and not m.group(2) and m.group(4) is None:
        pre = (-1, 0)  # 2.14.0.dev1 < 2.14.0a1
    return release, pre, post, dev


def is_version(text: str) -> bool:
    return bool(_VERSION.match(text.strip()))


def build_date(version: str) -> dt.date | None:
    """The date of a nightly (`2.14.0.dev20261115` -> 2026-11-15); None for other versions."""
    m = re.search(r"dev(\d{8})", version)
    if not m:
        return None
    try:
        return dt.datetime.strptime(m.group(1), "%Y%m%d").date()
    except ValueError:
        return None


@dataclass(frozen=True)
class Build:
    """One build to try: a torch version to install, or a prepared interpreter (`python` set)."""

    label: str
    python: str = ""

    @property
    def date(self) -> dt.date | None:
        return build_date(self.label)


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[tuple[str, str]] = []
        self._href = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._href = dict(attrs).get("href") or ""

    def handle_data(self, data: str) -> None:
        if self._href:
            self.hrefs.append((self._href, data.strip()))
            self._href = ""


def list_versions(index_url: str, *, python_tag: str | None = None, platform_tags: Sequence[str] | None = None,
                  timeout_s: float = 60.0) -> list[str]:
    """Versions of torch on a PEP 503 simple index with a wheel this interpreter can install, oldest first.

    `index_url` is the index root (`.../whl/nightly/cpu` or `file:///path/simple`); the page read is
    `<index_url>/torch/`. Local build tags (`+cpu`) are kept as they appear.
    """
    page = index_url.rstrip("/") + "/torch/"
    if page.startswith("file:"):  # a folder index, as pip reads one: its index.html
        folder = Path(urllib.request.url2pathname(urllib.parse.urlparse(page).path))
        page = (folder / "index.html").as_uri() if folder.is_dir() else page
    try:
        with urllib.request.urlopen(page, timeout=timeout_s) as response:
            text = response.read().decode("utf-8", errors="replace")
    except (OSError, ValueError) as e:
        raise UsageError(f"cannot list the builds on {page}: {getattr(e, 'reason', e)}; give the builds in order "
                         "with --builds FILE") from None
    parser = _Links()
    parser.feed(text)
    python_tag = python_tag or f"cp{sys.version_info.major}{sys.version_info.minor}"
    platform_tags = tuple(platform_tags or _platform_tags())
    found = set()
    for href, name in parser.hrefs:
        filename = urllib.parse.unquote(name or href.rsplit("/", 1)[-1].split("#", 1)[0])
        m = _WHEEL.match(filename)
        if not m or not is_version(m.group("version")):
            continue
        if python_tag not in m.group("py").split(".") or not _platform_ok(m.group("plat"), platform_tags):
            continue
        found.add(m.group("version"))
    return sorted(found, key=sort_key)


def _platform_tags() -> list[str]:
    machine = platform.machine().lower()
    if sys.platform.startswith("linux"):
        return [f"manylinux_*_{machine}", f"manylinux2014_{machine}", f"linux_{machine}"]
    if sys.platform == "darwin":
        return [f"macosx_*_{'arm64' if machine == 'arm64' else machine}"]
    if sys.platform.startswith("win"):
        return ["win_amd64"]
    return [machine]


def _platform_ok(plat: str, patterns: Sequence[str]) -> bool:
    import fnmatch

    return any(fnmatch.fnmatchcase(p, pattern) for p in plat.split(".") for pattern in patterns)


def between(versions: Sequence[str], good: str, bad: str) -> list[str]:
    """The versions from good to bad inclusive, in order; good and bad must be among them (local tags aside)."""
    base = [v.split("+")[0] for v in versions]
    problems = [f"--{role} {v} is not among the {len(versions)} builds listed; pick one of them (first: "
                f"{versions[0] if versions else '-'}, last: {versions[-1] if versions else '-'})"
                for role, v in (("good", good), ("bad", bad)) if v.split("+")[0] not in base]
    if problems:
        raise UsageError(*problems)
    lo, hi = base.index(good.split("+")[0]), base.index(bad.split("+")[0])
    if lo >= hi:
        raise UsageError(f"--good {good} must come before --bad {bad}; good is the older build")
    return list(versions[lo:hi + 1])


def read_builds(path: Path) -> list[Build]:
    """A --builds file: one build a line, oldest first: a torch version, or a path to a prepared interpreter
    (optionally `LABEL=PATH`). Blank lines and `#` comments are ignored."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise UsageError(f"--builds {path}: cannot read it ({e.strerror}); give a file with one build a line") from None
    builds, problems = [], []
    for n, line in enumerate(lines, 1):
        item = line.split("#", 1)[0].strip()
        if not item:
            continue
        label, sep, python = item.partition("=")
        if sep and label.strip() and python.strip():
            builds.append(Build(label.strip(), python.strip()))
        elif is_version(item):
            builds.append(Build(item))
        elif "/" in item or Path(item).exists():
            builds.append(Build(Path(item).parent.parent.name or item, item))
        else:
            problems.append(f"--builds {path}:{n}: {item!r} is neither a torch version like 2.14.0.dev20261115 nor "
                            "a path to an interpreter (or LABEL=PATH)")
    if len(builds) < 2 and not problems:
        problems.append(f"--builds {path} names {len(builds)} build(s); bisecting needs a good and a bad one at least")
    if problems:
        raise UsageError(*problems)
    return builds
