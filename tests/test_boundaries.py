"""The architecture holds: each file has a role and imports only from the roles below it, no import circle (between
modules or folders), pure modules do no I/O, torch stays inside the worker role (worker/ and the aspects' run.py
files, which only the worker asks for)."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "src" / "torch_upgrade_check"
WORKER_ALLOWED = {"torch", "torch_upgrade_check.model", "torch_upgrade_check.schema", "torch_upgrade_check.worker",
                  "onnxruntime"}  # the onnx aspect, only where the onnx extra is installed (else it skips first)


# Each source file's role, in one table: a file (its path below src/torch_upgrade_check) or a folder ("worker/": every
# file below it that has no row of its own). A new file of a folder takes the folder's role; a new top-level module or
# folder fails the test until it is given one.
ROLE_OF: dict[str, str] = {
    # the shared vocabulary and the decisions: no torch, no processes, no files (schema.py: see PURE_WRITES)
    "__init__.py": "pure", "errors.py": "pure", "aspects/": "pure", "model.py": "pure", "schema.py": "pure",
    "values.py": "pure", "suite.py": "pure", "analysis/": "pure", "report/": "pure",
    "worker/": "worker",
    # the host: the team's inputs read, processes, venvs, timeouts, GitHub's files
    "config.py": "host", "configfile/": "host", "locks.py": "host", "stack.py": "host", "github.py": "host", "orchestrate/": "host",
    "hostchecks/": "host", "history/": "host",
    "commands/": "command",
    "cli.py": "front end", "action_entry.py": "front end", "action/": "front end", "__main__.py": "front end",
}

# An aspect's folder, aspects/<folder>/, spans roles by file: judge.py is a pure decision, render.py a pure renderer,
# host.py and its helpers host_*.py the host's (a Runs.HOST aspect's checks, beside the workers), every other file of
# it (run.py and its helpers) the worker's; aspects/__init__.py (the table) and aspects/_*.py (shared vocabulary) are
# pure, by the "aspects/" row.
ASPECT_FILE_ROLES = {"__init__.py": "pure", "judge.py": "pure", "render.py": "pure", "host.py": "host"}
HOST_HELPER = "host_"  # aspects/<folder>/host_<x>.py: a helper of its host.py, of the host's role

# The roles, bottom first: what each is, and the roles whose modules it may import (its own included; a circle
# within a role is caught by the no-cycles tests).
ROLES: dict[str, tuple[str, frozenset[str]]] = {
    "pure": ("the shared vocabulary and the pure decisions and renderers", frozenset({"pure"})),
    "worker": ("the worker, inside the environment under test (the only code importing torch)",
               frozenset({"pure", "worker"})),
    "host": ("the host: the team's inputs, processes, venvs, timeouts, the checks beside the workers, GitHub's files",
             frozenset({"pure", "worker", "host"})),
    "command": ("a subcommand: settings in, exit code out", frozenset({"pure", "worker", "host", "command"})),
    "front end": ("a front door: the CLI, the action's entry",
                  frozenset({"pure", "worker", "host", "command", "front end"})),
}

# A pure module touches no file, process, clock or stream: none of these imported, no open()/print()/input().
IO_MODULES = frozenset({"os", "io", "sys", "pathlib", "subprocess", "shutil", "tempfile", "glob", "socket", "signal",
                        "threading", "multiprocessing", "concurrent", "asyncio", "time", "urllib", "http", "uuid",
                        "contextlib"})
IO_CALLS = frozenset({"open", "print", "input"})
PURE_WRITES = {"schema.py": "versioned JSON's atomic writes, shared by the worker and the host"}


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _cli_parses_with(blocked: str, imports: str) -> None:
    """`imports` succeed and the CLI parses in a fresh interpreter where importing `blocked` fails."""
    code = (f"import sys; sys.modules[{blocked!r}] = None\n{imports}\n"
            "assert cli.build_parser().parse_args(['run', '--device', 'cpu']).device == 'cpu'\nprint('ok')\n")
    proc = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, cwd=PKG.parent)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


def test_cli_imports_and_parses_with_torch_blocked() -> None:
    _cli_parses_with("torch", "from torch_upgrade_check import action_entry, cli, config, github, suite, values\n"
                              "from torch_upgrade_check.commands import argv, bisect, common, compare, init, merge, report, "
                              "run, settings, stack_checks\n"
                              "from torch_upgrade_check.report import junit, summary, annotations, outputs\n"
                              "from torch_upgrade_check.orchestrate import workers\n"
                              "from torch_upgrade_check.analysis import verdicts, stats")


def test_the_cli_runs_without_junitparser() -> None:
    """A GPU box with only torch and PyYAML (scripts/gpu-smoke.sh): JUnit is written only where junitparser is."""
    _cli_parses_with("junitparser", "from torch_upgrade_check import action_entry, cli, github\n"
                                    "from torch_upgrade_check.commands import bisect, compare, run")


def test_torch_is_imported_only_in_worker() -> None:
    """Only files whose role is worker import torch: worker/ and each aspect folder's worker files (run.py and its
    helpers; judge.py, render.py and host*.py never)."""
    offenders = [
        str(p.relative_to(PKG))
        for p in PKG.rglob("*.py")
        if role_of(p.relative_to(PKG).as_posix()) != "worker" and any(n == "torch" or n.startswith("torch.") for n in _imports(p))
    ]
    assert offenders == []


def test_worker_imports_only_stdlib_torch_and_model_schema() -> None:
    stdlib = set(sys.stdlib_module_names)
    bad = {}
    for path in (p for p in PKG.rglob("*.py") if role_of(p.relative_to(PKG).as_posix()) == "worker"):
        for name in _imports(path):
            top = name.split(".")[0]
            if top in stdlib or top == "torch":
                continue
            if any(name == a or name.startswith(a + ".") for a in WORKER_ALLOWED):
                continue
            if name.startswith("torch_upgrade_check.aspects") and _aspect_role_of(name) in ("pure", "worker"):
                continue  # the table, and the worker side of an aspect's folder
            bad[path.name] = name
    assert bad == {}


def _aspect_role_of(name: str) -> str | None:
    """The role of an imported module of aspects/: `torch_upgrade_check.aspects.amp.run` is aspects/amp/run.py's."""
    parts = name.split(".")[1:]
    rel = "/".join(parts) + ".py"
    return role_of(rel) if (PKG / rel).exists() else role_of("/".join(parts) + "/__init__.py")


def test_aspects_is_stdlib_only() -> None:
    """model imports it, so the worker does: the aspects' table must not bring anything else in."""
    tables = [PKG / "aspects" / "__init__.py", *(PKG / "aspects").glob("_*.py")]
    assert all(n.split(".")[0] in set(sys.stdlib_module_names) for p in tables for n in _imports(p))


def test_values_is_stdlib_and_errors_only() -> None:
    """Every front end imports it, the action's entry before anything is installed."""
    stdlib = set(sys.stdlib_module_names)
    names = _imports(PKG / "values.py")
    assert all(n.split(".")[0] in stdlib or n == "torch_upgrade_check.errors" for n in names), names



def _module(rel: Path) -> str:
    """The dotted name of a file below the package root: `orchestrate/session.py` is
    torch_upgrade_check.orchestrate.session, a package's __init__.py the package."""
    parts = rel.with_suffix("").parts
    return ".".join((PKG.name, *(parts[:-1] if parts[-1] == "__init__" else parts)))


def _package_imports(path: Path, modules: set[str]) -> set[str]:
    """The package's modules a file imports anywhere in it (at module level, inside a function, under
    TYPE_CHECKING): `from torch_upgrade_check import config` is config, `from torch_upgrade_check.model import X`
    is model, `import torch_upgrade_check.a.b` is the longest of its prefixes that is a module."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                     for a in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            known = [".".join(parts[:i]) for i in range(len(parts), 0, -1) if ".".join(parts[:i]) in modules]
            found.update(known[:1])
    return found


def _graph(root: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (itself left out)."""
    files = {_module(p.relative_to(root)): p for p in sorted(root.rglob("*.py"))}
    return {m: _package_imports(p, set(files)) - {m} for m, p in files.items()}


def role_of(rel: str, table: dict[str, str] = ROLE_OF) -> str | None:
    """A file's role: its own row, else the row of the nearest folder above it that has one. An aspect's folder
    spans roles by file (ASPECT_FILE_ROLES)."""
    parts = rel.split("/")
    if parts[0] == "aspects" and len(parts) == 3:
        return "host" if parts[2].startswith(HOST_HELPER) else ASPECT_FILE_ROLES.get(parts[2], "worker")
    if rel in table:
        return table[rel]
    parts = rel.split("/")
    for i in range(len(parts) - 1, 0, -1):
        if f"{'/'.join(parts[:i])}/" in table:
            return table[f"{'/'.join(parts[:i])}/"]
    return None


def _roles(root: Path, table: dict[str, str]) -> dict[str, str]:
    """Module -> role, for every file below `root`; a file with no role fails here, naming it."""
    rels = {_module(p.relative_to(root)): p.relative_to(root).as_posix() for p in sorted(root.rglob("*.py"))}
    unplaced = sorted(rel for rel in rels.values() if role_of(rel, table) is None)
    assert unplaced == [], f"{unplaced}: a new module or folder; give it its role in ROLE_OF"
    return {m: role_of(rel, table) or "" for m, rel in rels.items()}


def wrong_role_imports(root: Path, table: dict[str, str] = ROLE_OF) -> list[str]:
    """Every import, at module level or inside a function, of a module whose role the importer's may not import."""
    roles = _roles(root, table)
    return [f"{m} ({roles[m]}) imports {t} ({roles[t]})" for m, targets in _graph(root).items()
            for t in sorted(targets) if roles[t] not in ROLES[roles[m]][1]]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each strongly connected group of more than one node (a circle of imports), as one circle through it."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = stack[stack.index(v):]
            del stack[stack.index(v):]
            if len(group) > 1:
                groups.append(_circle(graph, sorted(group)))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return groups


def _circle(graph: dict[str, set[str]], group: list[str]) -> list[str]:
    """One path from the group's first node back to itself, inside the group (breadth first: the shortest)."""
    start, inside = group[0], set(group)
    paths = [[start]]
    while paths:
        path = paths.pop(0)
        for w in sorted(graph[path[-1]] & inside):
            if w == start:
                return [*path, start]
            if w not in path:
                paths.append([*path, w])
    return group


def _folder(module: str) -> str:
    """The folder a module lives in (a top-level module is its own unit): the unit of the folder-level graph."""
    parts = module.split(".")
    return module if len(parts) == 2 or PKG.joinpath(*parts[1:]).is_dir() else ".".join(parts[:-1])


def folder_graph(graph: dict[str, set[str]], folder: Callable[[str], str] = _folder) -> dict[str, set[str]]:
    """Folder -> the folders its modules import (a package's __init__ belongs to the package's own folder)."""
    out: dict[str, set[str]] = {}
    for m, targets in graph.items():
        mine = folder(m)
        out.setdefault(mine, set()).update(folder(t) for t in targets if folder(t) != mine)
    return out


def test_every_file_has_a_role_and_every_row_a_file() -> None:
    rels = [p.relative_to(PKG).as_posix() for p in PKG.rglob("*.py")]
    assert all(role in ROLES for role in ROLE_OF.values())
    stale = [row for row in ROLE_OF if not any(r == row or (row.endswith("/") and r.startswith(row)) for r in rels)]
    assert stale == [], f"{stale}: rows of ROLE_OF naming no file"
    _roles(PKG, ROLE_OF)


def test_no_module_imports_a_role_above_its_own() -> None:
    assert wrong_role_imports(PKG) == []


def test_no_import_cycle_between_modules() -> None:
    """A function-level import or one under TYPE_CHECKING that dodges a circle is still the circle."""
    assert cycles(_graph(PKG)) == []


def test_no_import_cycle_between_folders() -> None:
    """orchestrate/ and hostchecks/ (say) import each other in one direction only."""
    assert cycles(folder_graph(_graph(PKG))) == []


def test_pure_modules_do_no_io() -> None:
    bad = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG).as_posix()
        if role_of(rel) != "pure" or rel in PURE_WRITES:
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
            bad += [f"{rel} imports {n}" for n in names if n.split(".")[0] in IO_MODULES]
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in IO_CALLS:
                bad.append(f"{rel} calls {node.func.id}()")
    assert bad == []


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_the_checks_find_a_circle_dodged_inside_a_function_and_a_role_going_up(tmp_path: Path) -> None:
    root = _tree(tmp_path / PKG.name, {
        "__init__.py": "",
        "analysis/__init__.py": "", "analysis/x.py": "def f():\n    from torch_upgrade_check.orchestrate import y\n",
        "orchestrate/__init__.py": "", "orchestrate/y.py": "from torch_upgrade_check.analysis import x\n",
        "commands/__init__.py": "",
        "commands/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from torch_upgrade_check.commands.b import B\n",
        "commands/b.py": "import torch_upgrade_check.commands.a\n",
    })
    table = {"__init__.py": "pure", "analysis/": "pure", "orchestrate/": "host", "commands/": "command"}
    assert wrong_role_imports(root, table) == [
        "torch_upgrade_check.analysis.x (pure) imports torch_upgrade_check.orchestrate.y (host)"]
    graph = {m.replace(PKG.name, "pkg"): {t.replace(PKG.name, "pkg") for t in ts} for m, ts in _graph(root).items()}
    assert cycles(graph) == [["pkg.analysis.x", "pkg.orchestrate.y", "pkg.analysis.x"],
                             ["pkg.commands.a", "pkg.commands.b", "pkg.commands.a"]]


def test_the_folder_check_finds_a_circle_no_two_modules_make(tmp_path: Path) -> None:
    """orchestrate.session -> hostchecks.passthrough -> orchestrate.workers: no module circle, a folder circle."""
    graph = {"p.orchestrate.session": {"p.hostchecks.passthrough"}, "p.hostchecks.passthrough": {"p.orchestrate.workers"},
             "p.orchestrate.workers": set()}
    assert cycles(graph) == []
    assert cycles(folder_graph(graph, lambda m: m.rsplit(".", 1)[0])) == [["p.hostchecks", "p.orchestrate",
                                                                            "p.hostchecks"]]


def test_no_relative_imports() -> None:
    """_imports reads absolute imports only: a relative one would slip past the layering."""
    relative = [str(p.relative_to(PKG)) for p in PKG.rglob("*.py")
                if any(isinstance(n, ast.ImportFrom) and n.level for n in ast.walk(ast.parse(p.read_text())))]
    assert relative == []
