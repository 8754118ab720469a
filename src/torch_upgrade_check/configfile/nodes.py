"""The config file's YAML as nodes that keep their line numbers: typed reads of scalars, mappings and name lists,
each problem recorded with its line and a likely typo named (no torch)."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml

from torch_upgrade_check.errors import UsageError

_ALIASES = {"bf16": "bfloat16", "fp16": "float16", "half": "float16", "fp32": "float32", "float": "float32",
            "fp64": "float64", "double": "float64", "gpu": "cuda", "mlx": "mps", "metal": "mps"}
T = TypeVar("T")


def one_line(text: str) -> str:
    return " ".join(str(text).split())


def suggest(word: object, allowed: Sequence[str]) -> str:
    """' (did you mean 'x'?)' for a likely typo of one of `allowed`, else ''."""
    if not isinstance(word, str):
        return ""
    plain = word.strip().lower().removeprefix("torch.")
    if plain in allowed and plain != word:
        return f" (did you mean '{plain}'?)"
    if _ALIASES.get(plain) in allowed:
        return f" (did you mean '{_ALIASES[plain]}'?)"
    close = difflib.get_close_matches(plain, allowed, n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


class Nodes:
    """Walks the composed YAML nodes (which keep line numbers), collecting every problem before raising.

    Once a problem is recorded the result is never used, so the walkers return placeholders freely.
    """

    def __init__(self, file: str, path: Path) -> None:
        self.file, self.path = file, path
        self.problems: list[tuple[int, str]] = []
        self.seen: dict[str, str] = {}  # workload and artifact names -> "workloads[i] (line n)": one namespace
        self._constructor = yaml.constructor.SafeConstructor()

    def error(self, at: yaml.Node | int, message: str) -> None:
        line = at if isinstance(at, int) else at.start_mark.line + 1
        self.problems.append((line, f"{self.file}:{line}: {message}"))

    def raise_problems(self) -> None:
        if self.problems:  # in file order; sorted() is stable, so one line's problems keep their order
            raise UsageError(*(text for _, text in sorted(self.problems, key=lambda p: p[0])))

    def scalar(self, node: yaml.Node) -> Any:
        return self._constructor.construct_object(node, deep=True) if isinstance(node, yaml.ScalarNode) else node

    def got(self, node: yaml.Node) -> str:
        if not isinstance(node, yaml.ScalarNode):
            return "a mapping" if isinstance(node, yaml.MappingNode) else "a list"
        value = self.scalar(node)
        return "nothing" if value is None else str(value).lower() if isinstance(value, bool) else repr(value)

    def mapping(self, node: yaml.Node, key: str, allowed: Sequence[str], example: str) -> dict[str, yaml.Node] | None:
        """{key: value node} of a mapping with only `allowed` keys; None (and a problem) when it is not one."""
        if not isinstance(node, yaml.MappingNode):
            self.error(node, f"{key or 'the top level'} must be a mapping like {example}, got {self.got(node)}")
            return None
        where, out, first = f"{key}: " if key else "", {}, {}
        for k, v in node.value:
            name = self.scalar(k)
            if not isinstance(name, str):
                self.error(k, f"{where}keys must be names, got {self.got(k)}; allowed keys: {', '.join(allowed)}")
            elif name in first:
                self.error(k, f"{where}key '{name}' appears twice (first on line {first[name]}); keep one")
            elif name not in allowed:
                self.error(k, f"{where}unknown key '{name}'{suggest(name, allowed)}; allowed keys: {', '.join(allowed)}")
            else:
                first[name], out[name] = k.start_mark.line + 1, v
        return out

    def names(self, node: yaml.Node, key: str, what: str, allowed: Sequence[str], example: str) -> tuple[str, ...]:
        """A non-empty list of names from `allowed`, returned in `allowed` order without duplicates."""
        if not isinstance(node, yaml.SequenceNode):
            self.error(node, f"{key} must be a list of {what}s like {example}, got {self.got(node)}")
            return ()
        if not node.value:
            self.error(node, f"{key} is empty; leave it out for the default, or list some of: {', '.join(allowed)}")
        for item in node.value:
            value = self.scalar(item)
            if value in ("fsdp2", "ddp") and what == "aspect":
                how = " (ddp: run with --ddp)" if value == "ddp" else ""
                self.error(item, f"{key}: {value} trains the built-in transformer_block and never calls a factory; "
                                 f"remove it{how} (allowed: {', '.join(allowed)})")
            elif not isinstance(value, str) or value not in allowed:
                shown = repr(value) if isinstance(value, str) else self.got(item)
                self.error(item, f"{key}: unknown {what} {shown}{suggest(value, allowed)}; allowed: {', '.join(allowed)}")
        chosen = {self.scalar(item) for item in node.value}
        return tuple(a for a in allowed if a in chosen)

    def value(self, parse: Callable[..., T], node: yaml.Node, key: str) -> T | None:
        """parse(the node's value, key) by the rules in values.py, or None and its problem at the node's line."""
        try:
            return parse(self.scalar(node), key, got=self.got(node))
        except UsageError as e:
            for problem in e.problems:
                self.error(node, problem)
            return None
