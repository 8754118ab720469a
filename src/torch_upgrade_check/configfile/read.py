"""torch-upgrade-check.yml -> a frozen Config (config.py), section by section; every problem names the file, line,
key and the fix, all collected before one UsageError (no torch)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from torch_upgrade_check import suite
from torch_upgrade_check.config import (
    ARTIFACT_KEYS,
    ARTIFACT_KINDS,
    COMPILE_KEYS,
    DEFAULT_ASPECTS,
    DEFAULT_PATH,
    FLEET_KEYS,
    JIT_MODES,
    ONNX_EXPORTERS,
    PYTEST_KEYS,
    SCHEMA_VERSION,
    THRESHOLD_KEYS,
    TOP_KEYS,
    WORKLOAD_ASPECTS,
    WORKLOAD_KEYS,
    CompileOptions,
    Config,
    FleetConfig,
    PytestConfig,
    ShippedArtifact,
    Thresholds,
    UserWorkload,
)
from torch_upgrade_check.configfile.nodes import Nodes, one_line, suggest
from torch_upgrade_check.errors import UsageError
from torch_upgrade_check.model import COMPILE_MODES, DEVICES, DTYPES
from torch_upgrade_check.values import flag, milliseconds, percent, steps, threads, timeout, tolerance, undecided

_NAME = re.compile(r"[A-Za-z0-9_.-]+\Z")  # no [ ] / *: check ids are `name[dtype]/aspect` and --only globs them
_FACTORY = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*\Z")


def load_config(path: Path | None = None, *, explicit: bool = False) -> Config | None:
    """Read and check the config; None when no path was given and ./torch-upgrade-check.yml does not exist.

    `explicit` (the user named the file, e.g. with --config) makes a missing file an error.
    """
    path = DEFAULT_PATH if path is None else Path(path)
    if not path.exists():
        if not explicit:
            return None
        raise UsageError(f"config file {path} not found; pass --config the path of a torch-upgrade-check.yml, "
                         f"or run 'torch-upgrade-check init' to write one")
    if path.is_dir():
        raise UsageError(f"config file {path} is a folder; pass --config the path of a torch-upgrade-check.yml")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"cannot read config file {path}: {one_line(str(e))}") from None
    return parse_config(text, path)


def parse_config(text: str, path: Path) -> Config:
    """Check the YAML text of a config file named `path`; raises one UsageError listing every problem."""
    file = str(path)
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"{file}:{mark.line + 1}" if mark else file
        what = ": ".join(x for x in (e.context, e.problem) if x) or "unreadable"
        column = f" (column {mark.column + 1})" if mark else ""
        raise UsageError(f"{where}: invalid YAML: {one_line(what)}{column}") from None
    except yaml.YAMLError as e:
        raise UsageError(f"{file}: invalid YAML: {one_line(str(e))}") from None
    if root is None:
        raise UsageError(f"{file}: the file is empty; it needs at least 'version: 1' "
                         f"(run 'torch-upgrade-check init' for a commented starter)")
    return _Checker(file, path).config(root)


class _Checker(Nodes):
    """The config's own keys, section by section, over the located YAML nodes (configfile.nodes)."""

    def config(self, root: yaml.Node) -> Config:
        top = self.mapping(root, "", TOP_KEYS, "'version: 1'")
        self.raise_problems()  # a top level that is not a mapping stops here
        top = top or {}
        if "version" not in top:
            self.error(1, "version is missing; add 'version: 1' at the top")
        elif type(self.scalar(top["version"])) is not int or self.scalar(top["version"]) != SCHEMA_VERSION:
            self.error(top["version"], f"version must be {SCHEMA_VERSION} (the schema version this tool reads), "
                                       f"got {self.got(top['version'])}")
        walkers = {"suite": self._suite, "python-path": self._python_path, "thresholds": self._thresholds,
                   "workloads": self._workloads, "pytest": self._pytest,
                   "requirements": lambda n: self._texts(n, "requirements", "[requirements.txt]"),
                   "extras": lambda n: self._texts(n, "extras", "[test, serve]"),
                   "threads": lambda n: self.value(threads, n, "threads"),
                   "ab-budget": lambda n: self.value(timeout, n, "ab-budget"),
                   "undecided": lambda n: self.value(undecided, n, "undecided"),
                   "fail-on-shared-failures": lambda n: self.value(flag, n, "fail-on-shared-failures"),
                   "check-timeout-seconds": lambda n: self.value(timeout, n, "check-timeout-seconds"),
                   "fleet": self._fleet, "artifacts": self._artifacts}
        fields = {key.replace("-", "_"): walk(top[key]) for key, walk in walkers.items() if key in top}
        self.raise_problems()
        return Config(path=self.path, **fields)

    def _suite(self, node: yaml.Node) -> tuple[str, ...]:
        value = self.scalar(node)
        if value == "builtin":
            return suite.BUILTIN_NAMES
        if isinstance(node, yaml.SequenceNode):
            return self.names(node, "suite", "built-in workload", suite.BUILTIN_NAMES, "[mlp, sdpa]") if node.value else ()
        if value != "none":
            hint = f" (for one built-in write [{value}])" if value in suite.BUILTIN_NAMES else suggest(value, ("builtin", "none"))
            self.error(node, f"suite must be 'builtin', 'none' or a list of built-in workload names like [mlp, sdpa], "
                             f"got {self.got(node)}{hint}")
        return ()

    def _python_path(self, node: yaml.Node) -> tuple[str, ...]:
        root = self.path.resolve().parent
        for item in node.value if isinstance(node, yaml.SequenceNode) else [node]:
            value = self.scalar(item)
            if not isinstance(value, str) or not value.strip():
                self.error(item, f"python-path must be a folder or a list of folders like [src], got {self.got(item)}")
            elif not (root / value).is_dir():
                self.error(item, f"python-path: folder '{value}' not found in {root}")
        return tuple(self.scalar(x) for x in (node.value if isinstance(node, yaml.SequenceNode) else [node]))

    def _texts(self, node: yaml.Node, key: str, example: str) -> tuple[str, ...]:
        """One text or a list of texts (files are checked when the stack is read: stack.load names the fix)."""
        items = node.value if isinstance(node, yaml.SequenceNode) else [node]
        for item in items:
            value = self.scalar(item)
            if not isinstance(value, str) or not value.strip():
                self.error(item, f"{key} must be a name or a list like {example}, got {self.got(item)}")
        return tuple(str(self.scalar(x)).strip() for x in items)

    def _thresholds(self, node: yaml.Node) -> Thresholds:
        keys = self.mapping(node, "thresholds", THRESHOLD_KEYS, "{rtol: 1.0e-4, max-latency-regression: 10%}") or {}
        values = {k: self.value(tolerance, keys[k], f"thresholds.{k}") for k in ("rtol", "atol") if k in keys}
        values.update({k.replace("-", "_"): self.value(percent, keys[k], f"thresholds.{k}")
                       for k in THRESHOLD_KEYS[2:] if k in keys})
        return Thresholds(**values)

    def _workloads(self, node: yaml.Node) -> tuple[UserWorkload, ...]:
        if not isinstance(node, yaml.SequenceNode):
            self.error(node, f"workloads must be a list of mappings like [{{name: tiny, factory: mypkg.models:build}}], "
                             f"got {self.got(node)}")
            return ()
        seen = self.seen  # name -> "workloads[i] (line n)"
        return tuple(w for i, item in enumerate(node.value) if (w := self._workload(item, i, seen)) is not None)

    def _workload(self, node: yaml.Node, index: int, seen: dict[str, str]) -> UserWorkload | None:
        key, line = f"workloads[{index}]", node.start_mark.line + 1
        keys = self.mapping(node, key, WORKLOAD_KEYS, "{name: tiny, factory: mypkg.models:build}")
        if keys is None:
            return None
        fields: dict[str, Any] = {"name": self._workload_name(keys, key, line, seen), "factory": self._factory(keys, key, line)}
        if "aspects" in keys:
            fields["aspects"] = self.names(keys["aspects"], f"{key}.aspects", "aspect", WORKLOAD_ASPECTS, "[numerics, latency]")
        if "dtypes" in keys:
            fields["dtypes"] = self.names(keys["dtypes"], f"{key}.dtypes", "dtype", DTYPES, "[float32, bfloat16]")
        fields.update({tol: self.value(tolerance, keys[tol], f"{key}.{tol}") for tol in ("rtol", "atol") if tol in keys})
        if "max-latency-ms" in keys:
            fields["max_latency_ms"] = self._latency_ms(keys["max-latency-ms"], f"{key}.max-latency-ms")
        if "training-steps" in keys:
            fields["training_steps"] = self.value(steps, keys["training-steps"], f"{key}.training-steps")
        if "allow-graph-breaks" in keys:
            fields["allow_graph_breaks"] = bool(self.value(flag, keys["allow-graph-breaks"], f"{key}.allow-graph-breaks"))
        if "jit" in keys:
            fields.update(self._declared(keys["jit"], f"{key}.jit", "jit", JIT_MODES, "script (torch.jit.script) or "
                                         "trace (torch.jit.trace on the workload's inputs)",
                                         fields.get("aspects", DEFAULT_ASPECTS)))
        if "onnx" in keys:
            fields.update(self._declared(keys["onnx"], f"{key}.onnx", "onnx", ONNX_EXPORTERS, "dynamo (dynamo=True), "
                                         "legacy (dynamo=False) or default (no dynamo= argument)",
                                         fields.get("aspects", DEFAULT_ASPECTS)))
        if "compile" in keys:
            fields["compile"] = self._compile(keys["compile"], f"{key}.compile")
        return UserWorkload(line=line, **fields)

    def _compile(self, node: yaml.Node, key: str) -> CompileOptions:
        """`compile: {mode, dynamic, fullgraph, backend, options}`, checked as far as no torch is needed: a backend's
        name and Inductor's option names are the torch under test's to accept (its error is the check's reason)."""
        keys = self.mapping(node, key, COMPILE_KEYS, "{mode: max-autotune-no-cudagraphs, dynamic: true}")
        if keys is None:
            return CompileOptions()
        fields: dict[str, Any] = {}
        if "mode" in keys:
            mode = self.scalar(keys["mode"])
            if not isinstance(mode, str) or mode not in COMPILE_MODES:
                self.error(keys["mode"], f"{key}.mode must be one of {', '.join(COMPILE_MODES)} (torch.compile's "
                                         f"modes), got {self.got(keys['mode'])}{suggest(mode, COMPILE_MODES)}")
            else:
                fields["mode"] = mode
        for flag_key in ("dynamic", "fullgraph"):
            if flag_key in keys:
                fields[flag_key] = self.value(flag, keys[flag_key], f"{key}.{flag_key}")
        if "backend" in keys:
            backend = self.scalar(keys["backend"])
            if not isinstance(backend, str) or not backend.strip():
                self.error(keys["backend"], f"{key}.backend must be the name of a torch.compile backend like inductor, "
                                            f"aot_eager or eager, got {self.got(keys['backend'])}")
            else:
                fields["backend"] = backend.strip()
        if "options" in keys:
            fields["options"] = self._compile_options(keys["options"], f"{key}.options")
            if "mode" in keys:
                self.error(keys["options"], f"{key}: give mode or options, not both (torch.compile refuses the two "
                                            f"together); put what the mode sets in options, like {{max_autotune: true}}")
        return CompileOptions(**fields)

    def _compile_options(self, node: yaml.Node, key: str) -> tuple[tuple[str, Any], ...]:
        if not isinstance(node, yaml.MappingNode):
            self.error(node, f"{key} must be a mapping of Inductor options like {{max_autotune: true, "
                             f"epilogue_fusion: false}}, got {self.got(node)}")
            return ()
        found: list[tuple[str, Any]] = []
        for k, v in node.value:
            name, value = self.scalar(k), self.scalar(v)
            if not isinstance(name, str) or not name.strip():
                self.error(k, f"{key}: each option must be named, like max_autotune, got {self.got(k)}")
            elif name in dict(found):
                self.error(k, f"{key}: option '{name}' appears twice; keep one")
            elif not isinstance(v, yaml.ScalarNode) or value is None:
                self.error(v, f"{key}.{name} must be a number, text, true or false, got {self.got(v)}")
            else:
                found.append((name, value))
        return tuple(found)

    def _declared(self, node: yaml.Node, key: str, aspect: str, modes: tuple[str, ...], meaning: str,
                  aspects: tuple[str, ...]) -> dict[str, Any]:
        """`jit: script|trace`, `onnx: dynamo|legacy|default`: how the workload's artifact is built; declaring it plans
        the aspect."""
        value = self.scalar(node)
        if value not in modes:
            self.error(node, f"{key} must be {meaning}, got {self.got(node)}")
            return {}
        return {aspect: value, "aspects": tuple(a for a in WORKLOAD_ASPECTS if a in aspects or a == aspect)}

    def _workload_name(self, keys: Mapping[str, yaml.Node], key: str, line: int, seen: dict[str, str]) -> str:
        if "name" not in keys:
            self.error(line, f"{key} is missing 'name'; add a name like tiny_gpt (letters, digits, '_', '-', '.')")
            return ""
        node = keys["name"]
        name = self.scalar(node)
        if not isinstance(name, str) or not _NAME.match(name):
            self.error(node, f"{key}.name must be letters, digits, '_', '-' or '.', like tiny_gpt, got {self.got(node)}")
        elif name in suite.BUILTIN_NAMES:
            self.error(node, f"{key}.name '{name}' is the name of a built-in workload; choose another name "
                             f"(select built-ins with 'suite:')")
        elif name in seen:
            self.error(node, f"{key}.name '{name}' is already used by {seen[name]}; choose another name")
        else:
            seen[name] = f"{key} (line {line})"
        return str(name)

    def _factory(self, keys: Mapping[str, yaml.Node], key: str, line: int, what: str = "factory") -> str:
        if what not in keys:
            self.error(line, f"{key} is missing 'factory'; add the function that builds it, like mypkg.models:build")
            return ""
        node = keys[what]
        value = self.scalar(node)
        if isinstance(value, str) and _FACTORY.match(value.strip()):
            return value.strip()
        hint = ""
        if isinstance(value, str) and ":" not in value and "." in value:
            module, _, function = value.strip().rpartition(".")
            hint = f" (did you mean '{module}:{function}'?)"
        self.error(node, f"{key}.{what} must be MODULE:FUNCTION like mypkg.models:build, got {self.got(node)}{hint}")
        return ""

    def _latency_ms(self, node: yaml.Node, key: str) -> dict[str, float | None]:
        if isinstance(node, yaml.ScalarNode):
            return dict.fromkeys(DEVICES, self.value(milliseconds, node, key))
        if isinstance(node, yaml.MappingNode):
            keys = self.mapping(node, key, DEVICES, "{cpu: 80, cuda: 4}") or {}
            return {device: self.value(milliseconds, v, f"{key}.{device}") for device, v in keys.items()}
        self.error(node, f"{key} must be milliseconds like 25 or per device like {{cpu: 80, cuda: 4}}, got {self.got(node)}")
        return {}

    def _pytest(self, node: yaml.Node) -> PytestConfig:
        keys = self.mapping(node, "pytest", PYTEST_KEYS, "{args: [tests/, -k, 'not slow']}") or {}
        args = keys.get("args")
        if args is None:
            return PytestConfig()
        if not isinstance(args, yaml.SequenceNode):
            self.error(args, f"pytest.args must be a list like [tests/, -k, 'not slow'], got {self.got(args)}")
            return PytestConfig()
        for item in args.value:
            value = self.scalar(item)
            if isinstance(value, bool) or not isinstance(value, (str, int, float)):
                self.error(item, f"pytest.args: each argument must be text like tests/ or -x, got {self.got(item)}")
        return PytestConfig(tuple(str(self.scalar(item)) for item in args.value))

    def _artifacts(self, node: yaml.Node) -> tuple[ShippedArtifact, ...]:
        if not isinstance(node, yaml.SequenceNode):
            self.error(node, f"artifacts must be a list of mappings like [{{name: model, file: model.pt2, inputs: "
                             f"mypkg.models:example_inputs}}], got {self.got(node)}")
            return ()
        return tuple(a for i, item in enumerate(node.value) if (a := self._artifact(item, i)) is not None)

    def _artifact(self, node: yaml.Node, index: int) -> ShippedArtifact | None:
        key, line = f"artifacts[{index}]", node.start_mark.line + 1
        keys = self.mapping(node, key, ARTIFACT_KEYS, "{name: model, file: model.pt2, inputs: mypkg.models:example_inputs}")
        if keys is None:
            return None
        name = self._workload_name(keys, key, line, self.seen)
        file = self.scalar(keys["file"]) if "file" in keys else None
        if not isinstance(file, str) or not file.strip():
            self.error(keys.get("file", line), f"{key} needs 'file': the path of the file you ship, relative to this "
                                               f"config, like models/classifier.pt")
            return None
        if not (self.path.resolve().parent / file).is_file():
            self.error(keys["file"], f"{key}.file: no file '{file}' in {self.path.resolve().parent}; give its path "
                                     f"relative to this config")
        suffix = Path(file).suffix.lower()
        kind = self.scalar(keys["kind"]) if "kind" in keys else {".pt2": "export", ".onnx": "onnx"}.get(suffix, "checkpoint")
        if kind not in ARTIFACT_KINDS:
            self.error(keys["kind"], f"{key}.kind must be one of {', '.join(ARTIFACT_KINDS)}, got {self.got(keys['kind'])}")
            return None
        calls = {k: self._factory(keys, f"{key}", line, k) for k in ("factory", "inputs") if k in keys}
        if kind != "checkpoint" and not calls:
            self.error(line, f"{key}: the {kind} file runs on inputs: add 'inputs: MODULE:FUNCTION' (returns the inputs) "
                             f"or 'factory: MODULE:FUNCTION' (returns the model and its inputs)")
        return ShippedArtifact(name, file.strip(), str(kind), calls.get("factory", ""), calls.get("inputs", ""), line)

    def _fleet(self, node: yaml.Node) -> FleetConfig:
        from torch_upgrade_check.analysis.fleet import parse_arch, parse_driver, parse_memory

        keys = self.mapping(node, "fleet", FLEET_KEYS, "{archs: [sm_80, sm_90], driver: 535.104.05}") or {}
        archs: list[str] = []
        node_archs = keys.get("archs")
        if node_archs is not None:
            items = node_archs.value if isinstance(node_archs, yaml.SequenceNode) else None
            if items is None:
                self.error(node_archs, f"fleet.archs must be a list like [sm_80, sm_90], got {self.got(node_archs)}")
            for item in items or []:
                value = str(self.scalar(item))
                parsed = parse_arch(value)
                if parsed is None or parsed[0] != "sm":
                    self.error(item, f"fleet.archs: each must be a GPU architecture like sm_80 or sm_120, got {self.got(item)}")
                else:
                    archs.append(value.lower())
        driver = ""
        if "driver" in keys:
            driver = str(self.scalar(keys["driver"]))
            if parse_driver(driver) is None:
                self.error(keys["driver"], f"fleet.driver must be an NVIDIA driver version like 535.104.05, got "
                                           f"{self.got(keys['driver'])}")
        memory = 0
        if "memory" in keys:
            memory = parse_memory(self.scalar(keys["memory"])) or 0
            if not memory:
                self.error(keys["memory"], f"fleet.memory must be the smallest card's memory like 24GiB or 16GB, got "
                                           f"{self.got(keys['memory'])}")
        return FleetConfig(tuple(archs), driver, memory)
