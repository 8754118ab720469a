"""The architecture holds: torch stays inside worker/, the worker imports only what it may, no import goes up a layer."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "src" / "torch_upgrade_check"
WORKER_ALLOWED = {"torch", "torch_upgrade_check.model", "torch_upgrade_check.schema", "torch_upgrade_check.worker",
                  "onnxruntime"}  # the onnx aspect, only where the onnx extra is installed (else it skips first)


# An aspect's folder, aspects/<folder>/, spans layers by file: judge.py is a pure decision, render.py a pure
# renderer, every other file of it (run.py and its helpers) the worker's; aspects/__init__.py (the table) and
# aspects/_*.py (shared vocabulary) are plain data.
ASPECT_ROLES = {"judge": "analysis", "render": "report"}


def _aspect_role(parts: tuple[str, ...]) -> str:
    """The LAYERS entry of a module under aspects/, by its path's parts below the package (no suffix)."""
    if len(parts) < 3 or parts[1].startswith("_") or parts[1] == "__init__":
        return "aspects"
    return ASPECT_ROLES.get(parts[2], "worker")


def _worker_files() -> list[Path]:
    """The worker's code: worker/ and the worker side of every aspect's folder."""
    return [p for p in PKG.rglob("*.py") if _unit(p, PKG) == "worker"]


# The layers, bottom first: a module imports from its own layer and those below it, never from one above. Each entry
# is a top-level module or a package of src/torch_upgrade_check ("torch_upgrade_check": the package's __init__).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("plain data: the vocabulary, versioned JSON, values (stdlib only)",
     ("torch_upgrade_check", "errors", "aspects", "model", "schema", "values", "costs", "suite")),
    ("the worker, inside the environment under test", ("worker",)),
    ("pure decisions", ("analysis",)),
    ("pure renderers and GitHub's files", ("report", "github", "pr_comment")),
    ("the host: processes, venvs, timeouts, and the checks run beside the workers", ("orchestrate", "hostchecks")),
    ("front ends: inputs, commands, the CLI and the action's entry",
     ("config", "locks", "stack", "runner_status", "scaffold", "commands", "cli", "action_entry", "__main__")),
)


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
    offenders = [
        str(p.relative_to(PKG))
        for p in PKG.rglob("*.py")
        if _unit(p, PKG) != "worker" and any(n == "torch" or n.startswith("torch.") for n in _imports(p))
    ]
    assert offenders == []


def test_worker_imports_only_stdlib_torch_and_model_schema() -> None:
    stdlib = set(sys.stdlib_module_names)
    bad = {}
    for path in _worker_files():
        for name in _imports(path):
            top = name.split(".")[0]
            if top in stdlib or top == "torch":
                continue
            if any(name == a or name.startswith(a + ".") for a in WORKER_ALLOWED):
                continue
            if name.startswith("torch_upgrade_check.aspects") and _module_unit(name) in ("aspects", "worker"):
                continue  # the table, and the worker side of an aspect's folder
            bad[path.name] = name
    assert bad == {}


def _loaded_imports(path: Path) -> set[str]:
    """What importing the module imports at once: its top-level imports, not those inside functions or under
    `if TYPE_CHECKING:` (for type hints only)."""
    names: set[str] = set()
    todo = list(ast.parse(path.read_text(), filename=str(path)).body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.update([node.module, *(f"{node.module}.{a.name}" for a in node.names)])
        elif isinstance(node, ast.If) and not (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
            todo += [*node.body, *node.orelse]
        elif isinstance(node, ast.Try):
            todo += [*node.body, *node.orelse, *node.finalbody, *(x for h in node.handlers for x in h.body)]
    return names


def test_the_commands_share_helpers_without_an_import_circle() -> None:
    """cli.py imports the commands; no command imports cli, and the modules of commands/ import each other in one
    direction only."""
    modules = {f"torch_upgrade_check.commands.{p.stem}": p for p in (PKG / "commands").glob("*.py")}
    for path in modules.values():
        assert "torch_upgrade_check.cli" not in _imports(path), f"{path.name} must not import cli"
    edges = {name: {m for m in _loaded_imports(path) if m in modules and m != name} for name, path in modules.items()}

    def circle(start: str, at: str, seen: tuple[str, ...]) -> tuple[str, ...]:
        for nxt in sorted(edges[at]):
            if nxt == start:
                return (*seen, nxt)
            if nxt not in seen:
                found = circle(start, nxt, (*seen, nxt))
                if found:
                    return found
        return ()

    circles = [circle(name, name, (name,)) for name in modules]
    assert not any(circles), [c for c in circles if c]


def test_aspects_is_stdlib_only() -> None:
    """model imports it, so the worker does: the aspects' table must not bring anything else in."""
    tables = [PKG / "aspects" / "__init__.py", *(PKG / "aspects").glob("_*.py")]
    assert all(n.split(".")[0] in set(sys.stdlib_module_names) for p in tables for n in _imports(p))


def test_values_is_stdlib_and_errors_only() -> None:
    """Every front end imports it, the action's entry before anything is installed."""
    stdlib = set(sys.stdlib_module_names)
    names = _imports(PKG / "values.py")
    assert all(n.split(".")[0] in stdlib or n == "torch_upgrade_check.errors" for n in names), names



def _unit(path: Path, root: Path) -> str:
    """The LAYERS entry a file belongs to: its package or top-level module below the package root."""
    parts = path.relative_to(root).with_suffix("").parts
    if parts[0] == "aspects":
        return _aspect_role(parts)
    return "torch_upgrade_check" if parts == ("__init__",) else parts[0]


def _module_unit(name: str) -> str:
    """The LAYERS entry of an imported module, `torch_upgrade_check.x.y`."""
    parts = tuple(name.split(".")[1:])
    if not parts:
        return "torch_upgrade_check"
    return _aspect_role(parts) if parts[0] == "aspects" else parts[0]


def _going_up(root: Path) -> list[str]:
    """Every import, at module level or inside a function, of a module from a layer above the importer's."""
    layer_of = {unit: i for i, (_, units) in enumerate(LAYERS) for unit in units}
    files = sorted(root.rglob("*.py"))
    unplaced = sorted({_unit(p, root) for p in files} - set(layer_of))
    assert unplaced == [], f"{unplaced}: a new module or package; give it its layer in LAYERS"
    up = []
    for path in files:
        mine = layer_of[_unit(path, root)]
        for name in _package_imports(path, root):
            theirs = layer_of[_module_unit(name)]
            if theirs > mine:
                up.append(f"{path.relative_to(root)} imports {name}, of {LAYERS[theirs][0]}")
    return up


def _package_imports(path: Path, root: Path) -> list[str]:
    """The package's modules a file imports: `from torch_upgrade_check import config` is config, not the package."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module == "torch_upgrade_check":
            names.update(f"{node.module}.{a.name}" if (root / f"{a.name}.py").exists() or (root / a.name).is_dir()
                         else node.module for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return sorted(n for n in names if n.split(".")[0] == "torch_upgrade_check")


def test_no_import_goes_up_a_layer() -> None:
    assert _going_up(PKG) == []


def test_an_import_going_up_a_layer_is_found_also_inside_a_function(tmp_path: Path) -> None:
    (tmp_path / "analysis").mkdir()
    (tmp_path / "analysis" / "x.py").write_text("def f():\n    from torch_upgrade_check.orchestrate import session\n")
    (tmp_path / "orchestrate").mkdir()
    (tmp_path / "orchestrate" / "y.py").write_text("from torch_upgrade_check import __version__, config, errors\n")
    for name in ("config.py", "errors.py", "__init__.py"):
        (tmp_path / name).write_text("")
    assert _going_up(tmp_path) == [
        "analysis/x.py imports torch_upgrade_check.orchestrate, of the host: processes, venvs, timeouts, and the checks "
        "run beside the workers",
        "orchestrate/y.py imports torch_upgrade_check.config, of front ends: inputs, commands, the CLI and the action's "
        "entry"]


def test_no_relative_imports() -> None:
    """_imports reads absolute imports only: a relative one would slip past the layering."""
    relative = [str(p.relative_to(PKG)) for p in PKG.rglob("*.py")
                if any(isinstance(n, ast.ImportFrom) and n.level for n in ast.walk(ast.parse(p.read_text())))]
    assert relative == []
