"""Which uses of a torch name the team's own code guards (pure `ast`): a try body whose handler falls back on
ImportError/AttributeError, a `hasattr` branch, `getattr` with a default, a branch on torch's version.

A name the candidate lacks that is reached only under such a guard is the team's own handling (the way libraries keep
working across torch releases), so the api check calls it suspicious instead of failing it. The guard is found by
walking from the use up its enclosing statements and expressions to the innermost one that guards it:

- `try:` whose handler catches ImportError, ModuleNotFoundError or AttributeError (alone or in a tuple), a bare
  `except:`, `Exception` or `BaseException`, and falls back: a handler that only raises (re-raises), only passes or
  ends by raising has no fallback, so the name's absence still breaks the code there. Only the try body is guarded;
  the handler's own fallback, `else:` and `finally:` are not.
- `if hasattr(X, "attr")` (alone, or one of an `and`'s operands) guards its body; `if not hasattr(...)` its `else:`;
  `hasattr(...) and use` and `use if hasattr(...) else other` the same. The hasattr guards the name when X.attr is
  the name or a prefix of it, X read through the file's torch aliases: `hasattr(model, "compile")` guards no
  `torch.compile` (an object the scan cannot follow guards nothing).
- `getattr(X, "attr", default)`: the name X.attr is reached with a default (the scan records it; without a default
  it is an ordinary use).
- A condition on torch's version guards both of its branches (each is the code for one side of the version):
  `torch.__version__` (read through aliases, also inside `packaging.version.parse(...)`), or a variable, attribute or
  function whose name holds "torch" and a version word (`TORCH_VERSION`, `torch_version`, `is_torch_greater_or_equal`,
  `_TORCH_GREATER_EQUAL_2_1`).
"""

from __future__ import annotations

import ast
from collections.abc import Callable

CAUGHT = ("ImportError", "ModuleNotFoundError", "AttributeError", "Exception", "BaseException")
VERSION_WORDS = ("version", "greater", "less", "older", "newer", "at_least")
SHOWN_CONDITION = 60  # characters of a version condition quoted in the guard's name

Resolve = Callable[[ast.AST], "str | None"]  # an expression -> the dotted torch name it spells, or None


def parents(tree: ast.AST) -> dict[int, ast.AST]:
    """{id(node): its parent} for every node of the tree."""
    return {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def guard_of(node: ast.AST, name: str, up: dict[int, ast.AST], resolve: Resolve) -> str | None:
    """What guards this use of `name` (the innermost guard, named as the report shows it), or None."""
    child = node
    while id(child) in up:
        parent = up[id(child)]
        found = _guard_at(parent, child, name, resolve)
        if found:
            return found
        child = parent
    return None


def _guard_at(parent: ast.AST, child: ast.AST, name: str, resolve: Resolve) -> str | None:
    if isinstance(parent, ast.Try) or type(parent).__name__ == "TryStar":
        return _try_guard(parent, child)
    if isinstance(parent, (ast.If, ast.IfExp)):
        if child is parent.test:
            return None
        positive = child in parent.body if isinstance(parent, ast.If) else child is parent.body
        return _condition_guard(parent.test, positive, name, resolve)
    if isinstance(parent, ast.BoolOp) and isinstance(parent.op, ast.And) and child in parent.values:
        earlier = parent.values[:parent.values.index(child)]
        return next((g for g in (_condition_guard(v, True, name, resolve) for v in earlier) if g), None)
    return None


def _try_guard(node: ast.AST, child: ast.AST) -> str | None:
    if child not in getattr(node, "body", []):
        return None
    for handler in getattr(node, "handlers", []):
        caught = _caught(handler)
        if caught and _falls_back(handler):
            return f"try/except {caught}"
    return None


def _caught(handler: ast.ExceptHandler) -> str | None:
    """What the handler catches that a missing name raises (ImportError, AttributeError, ...), or None."""
    if handler.type is None:
        return "(bare)"
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    for t in types:
        spelled = t.id if isinstance(t, ast.Name) else t.attr if isinstance(t, ast.Attribute) else None
        if spelled in CAUGHT:
            return spelled
    return None


def _falls_back(handler: ast.ExceptHandler) -> bool:
    """A handler that only passes, or ends by raising, lets the name's absence break the code: no fallback."""
    body = [s for s in handler.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    if not body or all(isinstance(s, ast.Pass) for s in body):
        return False
    return not isinstance(body[-1], ast.Raise)


def _condition_guard(test: ast.AST, positive: bool, name: str, resolve: Resolve) -> str | None:
    if _mentions_torch_version(test, resolve):
        shown = ast.unparse(test)
        shown = shown if len(shown) <= SHOWN_CONDITION else shown[:SHOWN_CONDITION - 1] + "…"
        return f"a torch version check ({shown})"
    checks = [test] if positive else []
    if positive and isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        checks = list(test.values)
    if not positive and isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        checks = [test.operand]
    for check in checks:
        if _hasattr_guards(check, name, resolve):
            return ast.unparse(check)
    return None


def _hasattr_guards(check: ast.AST, name: str, resolve: Resolve) -> bool:
    if not (isinstance(check, ast.Call) and isinstance(check.func, ast.Name) and check.func.id == "hasattr"
            and len(check.args) == 2 and isinstance(check.args[1], ast.Constant)
            and isinstance(check.args[1].value, str)):
        return False
    owner = resolve(check.args[0])
    if owner is None:  # an object the scan cannot follow: `hasattr(model, "compile")` says nothing of torch.compile
        return False
    guarded = f"{owner}.{check.args[1].value}"
    return name == guarded or name.startswith(guarded + ".")


def _mentions_torch_version(test: ast.AST, resolve: Resolve) -> bool:
    for node in ast.walk(test):
        if isinstance(node, ast.Attribute) and node.attr == "__version__":
            spelled = resolve(node)
            if spelled and spelled.startswith("torch"):
                return True
        word = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
        word = word.lower()
        if "torch" in word and any(w in word for w in VERSION_WORDS):
            return True
    return False
