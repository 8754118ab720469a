"""The config file: every malformed file gives exact one-line problems; defaults, overrides, the example."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from config_helpers import EXAMPLE, SCHEMA, validate_against_schema

from torch_upgrade_check import cli, suite
from torch_upgrade_check.config import (
    ARTIFACT_KEYS,
    ARTIFACT_KINDS,
    COMPILE_KEYS,
    CROSS_VERSION,
    DEFAULT_ASPECTS,
    PYTEST_KEYS,
    THRESHOLD_KEYS,
    TOP_KEYS,
    WORKLOAD_ASPECTS,
    WORKLOAD_KEYS,
    Config,
    Thresholds,
    drop_cross_version,
)
from torch_upgrade_check.configfile.read import load_config
from torch_upgrade_check.errors import UsageError
from torch_upgrade_check.model import COMPILE_MODES, DEVICES, DTYPES

W = "version: 1\nworkloads:\n  - name: tiny\n    factory: pkg.models:build\n"  # a good workload to break
ALLOWED_ASPECTS = ("numerics, cross-backend, cross-version, compile, determinism, checkpoint, training-curve, amp, dataloader, "
                   "latency, memory, compile-time, compile-cache, compiled-latency, warnings, export, jit, aoti, onnx")

# (id, file text, the one problem it must give); {file} is the config's path, {root} its folder.
MALFORMED = [
    ("empty", "", "{file}: the file is empty; it needs at least 'version: 1' "
                  "(run 'torch-upgrade-check init' for a commented starter)"),
    ("only-comments", "# nothing yet\n", "{file}: the file is empty; it needs at least 'version: 1' "
                                         "(run 'torch-upgrade-check init' for a commented starter)"),
    ("yaml-syntax", "version: 1\nsuite: [mlp\n",
     "{file}:3: invalid YAML: while parsing a flow sequence: expected ',' or ']', but got '<stream end>' (column 1)"),
    ("yaml-tab", "version: 1\n\tsuite: none\n",
     "{file}:2: invalid YAML: while scanning for the next token: found character '\\t' that cannot start any token "
     "(column 1)"),
    ("top-level-list", "- version: 1\n", "{file}:1: the top level must be a mapping like 'version: 1', got a list"),
    ("version-missing", "suite: builtin\n", "{file}:1: version is missing; add 'version: 1' at the top"),
    ("version-2", "version: 2\n", "{file}:1: version must be 1 (the schema version this tool reads), got 2"),
    ("version-text", "version: '1'\n", "{file}:1: version must be 1 (the schema version this tool reads), got '1'"),
    ("top-key-typo", "version: 1\nthreshold:\n  rtol: 1.0e-4\n",
     "{file}:2: unknown key 'threshold' (did you mean 'thresholds'?); allowed keys: version, suite, python-path, "
     "thresholds, workloads, pytest, requirements, extras, threads, ab-budget, undecided, fail-on-shared-failures, fleet, artifacts, "
     "check-timeout-seconds"),
    ("top-key-underscore", "version: 1\npython_path: [src]\n",
     "{file}:2: unknown key 'python_path' (did you mean 'python-path'?); allowed keys: version, suite, python-path, "
     "thresholds, workloads, pytest, requirements, extras, threads, ab-budget, undecided, fail-on-shared-failures, fleet, artifacts, "
     "check-timeout-seconds"),
    ("undecided-value", "version: 1\nundecided: maybe\n", "{file}:2: undecided must be fail or pass, got 'maybe'"),
    ("ab-budget-value", "version: 1\nab-budget: -5\n",
     "{file}:2: ab-budget must be a positive number like 600 (seconds per check), got -5"),
    ("threads-value", "version: 1\nthreads: 1.5\n", "{file}:2: threads must be 1 or more (a whole number like 4), got 1.5"),
    ("duplicate-key", "version: 1\nsuite: none\nsuite: builtin\n",
     "{file}:3: key 'suite' appears twice (first on line 2); keep one"),
    ("threshold-key-typo", "version: 1\nthresholds:\n  rtl: 1.0e-4\n",
     "{file}:3: thresholds: unknown key 'rtl' (did you mean 'rtol'?); allowed keys: rtol, atol, "
     "max-latency-regression, max-memory-regression, max-compile-time-regression"),
    ("thresholds-not-mapping", "version: 1\nthresholds: 10%\n",
     "{file}:2: thresholds must be a mapping like {rtol: 1.0e-4, max-latency-regression: 10%}, got '10%'"),
    ("percent-text", "version: 1\nthresholds:\n  max-latency-regression: ten%\n",
     "{file}:3: thresholds.max-latency-regression must be a percentage like 10% or a ratio like 0.10, got 'ten%'"),
    ("percent-ambiguous", "version: 1\nthresholds:\n  max-memory-regression: 10\n",
     "{file}:3: thresholds.max-memory-regression must be a percentage like 10% or a ratio like 0.10, got 10 "
     "(a ratio above 1 is ambiguous: write 10% for 10 percent)"),
    ("percent-list", "version: 1\nthresholds:\n  max-memory-regression: [10%]\n",
     "{file}:3: thresholds.max-memory-regression must be a percentage like 10% or a ratio like 0.10, got a list"),
    ("rtol-negative", "version: 1\nthresholds:\n  rtol: -1.0e-4\n",
     "{file}:3: thresholds.rtol must be a number ≥ 0 like 1e-4 (0 turns that part of the tolerance off), got -0.0001"),
    ("atol-text", "version: 1\nthresholds:\n  atol: small\n",
     "{file}:3: thresholds.atol must be a number ≥ 0 like 1e-4 (0 turns that part of the tolerance off), got 'small'"),
    ("suite-typo", "version: 1\nsuite: bultin\n",
     "{file}:2: suite must be 'builtin', 'none' or a list of built-in workload names like [mlp, sdpa], got 'bultin' "
     "(did you mean 'builtin'?)"),
    ("suite-unknown-name", "version: 1\nsuite: [mlp, trasformer_block]\n",
     "{file}:2: suite: unknown built-in workload 'trasformer_block' (did you mean 'transformer_block'?); allowed: "
     + ", ".join(suite.BUILTIN_NAMES)),
    ("python-path-missing-folder", "version: 1\npython-path: [scr]\n",
     "{file}:2: python-path: folder 'scr' not found in {root}"),
    ("python-path-mapping", "version: 1\npython-path: {src: 1}\n",
     "{file}:2: python-path must be a folder or a list of folders like [src], got a mapping"),
    ("workloads-mapping", "version: 1\nworkloads:\n  tiny: pkg.models:build\n",
     "{file}:3: workloads must be a list of mappings like [{name: tiny, factory: mypkg.models:build}], got a mapping"),
    ("workload-key-typo", W + "    aspect: [numerics]\n",
     "{file}:5: workloads[0]: unknown key 'aspect' (did you mean 'aspects'?); allowed keys: name, factory, aspects, "
     "dtypes, rtol, atol, max-latency-ms, allow-graph-breaks, training-steps, jit, onnx, compile"),
    ("compile-text", W + "    compile: max-autotune\n",
     "{file}:5: workloads[0].compile must be a mapping like {mode: max-autotune-no-cudagraphs, dynamic: true}, "
     "got 'max-autotune'"),
    ("compile-key-typo", W + "    compile: {fullgrap: true}\n",
     "{file}:5: workloads[0].compile: unknown key 'fullgrap' (did you mean 'fullgraph'?); allowed keys: mode, dynamic, "
     "fullgraph, backend, options"),
    ("compile-mode-typo", W + "    compile: {mode: max-autotune-no-cudagraph}\n",
     "{file}:5: workloads[0].compile.mode must be one of default, reduce-overhead, max-autotune, "
     "max-autotune-no-cudagraphs (torch.compile's modes), got 'max-autotune-no-cudagraph' "
     "(did you mean 'max-autotune-no-cudagraphs'?)"),
    ("compile-dynamic-text", W + "    compile: {dynamic: sometimes}\n",
     "{file}:5: workloads[0].compile.dynamic must be true or false, got 'sometimes'"),
    ("compile-backend-empty", W + "    compile: {backend: ''}\n",
     "{file}:5: workloads[0].compile.backend must be the name of a torch.compile backend like inductor, aot_eager or "
     "eager, got ''"),
    ("compile-mode-and-options", W + "    compile: {mode: max-autotune, options: {max_autotune: true}}\n",
     "{file}:5: workloads[0].compile: give mode or options, not both (torch.compile refuses the two together); put "
     "what the mode sets in options, like {max_autotune: true}"),
    ("compile-options-list", W + "    compile: {options: [max_autotune]}\n",
     "{file}:5: workloads[0].compile.options must be a mapping of Inductor options like {max_autotune: true, "
     "epilogue_fusion: false}, got a list"),
    ("compile-option-value-list", W + "    compile:\n      options:\n        max_autotune: [1]\n",
     "{file}:7: workloads[0].compile.options.max_autotune must be a number, text, true or false, got a list"),
    ("aspect-typo", W + "    aspects: [numerics, determinsm]\n",
     f"{{file}}:5: workloads[0].aspects: unknown aspect 'determinsm' (did you mean 'determinism'?); "
     f"allowed: {ALLOWED_ASPECTS}"),
    ("aspect-fsdp2", W + "    aspects: [fsdp2]\n",
     "{file}:5: workloads[0].aspects: fsdp2 trains the built-in transformer_block and never calls a factory; "
     f"remove it (allowed: {ALLOWED_ASPECTS})"),
    ("aspect-ddp", W + "    aspects: [ddp]\n",
     "{file}:5: workloads[0].aspects: ddp trains the built-in transformer_block and never calls a factory; "
     f"remove it (ddp: run with --ddp) (allowed: {ALLOWED_ASPECTS})"),
    ("aspects-empty", W + "    aspects: []\n",
     f"{{file}}:5: workloads[0].aspects is empty; leave it out for the default, or list some of: {ALLOWED_ASPECTS}"),
    ("aspects-text", W + "    aspects: numerics\n",
     "{file}:5: workloads[0].aspects must be a list of aspects like [numerics, latency], got 'numerics'"),
    ("dtype-alias", W + "    dtypes: [float32, bf16]\n",
     "{file}:5: workloads[0].dtypes: unknown dtype 'bf16' (did you mean 'bfloat16'?); "
     "allowed: float32, float16, bfloat16, float64, tf32"),
    ("dtype-torch-prefix", W + "    dtypes: [torch.float16]\n",
     "{file}:5: workloads[0].dtypes: unknown dtype 'torch.float16' (did you mean 'float16'?); "
     "allowed: float32, float16, bfloat16, float64, tf32"),
    ("factory-missing", "version: 1\nworkloads:\n  - name: tiny\n",
     "{file}:3: workloads[0] is missing 'factory'; add the function that builds it, like mypkg.models:build"),
    ("factory-no-colon", "version: 1\nworkloads:\n  - name: tiny\n    factory: pkg.models.build\n",
     "{file}:4: workloads[0].factory must be MODULE:FUNCTION like mypkg.models:build, got 'pkg.models.build' "
     "(did you mean 'pkg.models:build'?)"),
    ("name-missing", "version: 1\nworkloads:\n  - factory: pkg.models:build\n",
     "{file}:3: workloads[0] is missing 'name'; add a name like tiny_gpt (letters, digits, '_', '-', '.')"),
    ("name-builtin", "version: 1\nworkloads:\n  - name: mlp\n    factory: pkg.models:build\n",
     "{file}:3: workloads[0].name 'mlp' is the name of a built-in workload; choose another name "
     "(select built-ins with 'suite:')"),
    ("name-duplicate", W + "  - name: tiny\n    factory: pkg.models:other\n",
     "{file}:5: workloads[1].name 'tiny' is already used by workloads[0] (line 3); choose another name"),
    ("name-brackets", "version: 1\nworkloads:\n  - name: tiny[1]\n    factory: pkg.models:build\n",
     "{file}:3: workloads[0].name must be letters, digits, '_', '-' or '.', like tiny_gpt, got 'tiny[1]'"),
    ("latency-device-typo", W + "    max-latency-ms: {cpu: 80, gpu: 4}\n",
     "{file}:5: workloads[0].max-latency-ms: unknown key 'gpu' (did you mean 'cuda'?); allowed keys: cpu, cuda, mps"),
    ("latency-list", W + "    max-latency-ms: [80, 4]\n",
     "{file}:5: workloads[0].max-latency-ms must be milliseconds like 25 or per device like {cpu: 80, cuda: 4}, "
     "got a list"),
    ("training-steps-one", W + "    training-steps: 1\n",
     "{file}:5: workloads[0].training-steps must be a whole number of steps from 2 to 10000, like 50, got 1"),
    ("training-steps-text", W + "    training-steps: many\n",
     "{file}:5: workloads[0].training-steps must be a whole number of steps from 2 to 10000, like 50, got 'many'"),
    ("allow-graph-breaks-text", W + "    allow-graph-breaks: sometimes\n",
     "{file}:5: workloads[0].allow-graph-breaks must be true or false, got 'sometimes'"),
    ("latency-zero", W + "    max-latency-ms: {mps: 0}\n",
     "{file}:5: workloads[0].max-latency-ms.mps must be a positive number like 25, got 0"),
    ("pytest-args-text", "version: 1\npytest:\n  args: tests/ -k fast\n",
     "{file}:3: pytest.args must be a list like [tests/, -k, 'not slow'], got 'tests/ -k fast'"),
    ("pytest-key-typo", "version: 1\npytest:\n  arg: [tests/]\n",
     "{file}:3: pytest: unknown key 'arg' (did you mean 'args'?); allowed keys: args"),
]


@pytest.mark.parametrize(("text", "problem"), [c[1:] for c in MALFORMED], ids=[c[0] for c in MALFORMED])
def test_malformed_config_gives_one_exact_problem(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "torch-upgrade-check.yml"
    path.write_text(text)
    with pytest.raises(UsageError) as e:
        load_config(path, explicit=True)
    assert e.value.problems == (problem.replace("{file}", str(path)).replace("{root}", str(tmp_path)),)
    assert "\n" not in e.value.problems[0]


def test_every_problem_is_reported_together_in_line_order(tmp_path: Path) -> None:
    path = tmp_path / "cfg.yml"
    path.write_text("suite: [mpl]\nthresholds:\n  rtol: -1\n  max-latency-regression: lots\n"
                    "workloads:\n  - name: a\n    factory: nocolon\n    dtypes: [fp16]\n  - name: a\n    factory: m:f\n")
    with pytest.raises(UsageError) as e:
        load_config(path, explicit=True)
    lines = [p.partition(": ")[0] for p in e.value.problems]
    assert lines == [f"{path}:{n}" for n in (1, 1, 3, 4, 7, 8, 9)]
    assert "version is missing" in e.value.problems[0] and "'mpl' (did you mean 'mlp'?)" in e.value.problems[1]
    assert str(e.value).count("\n") == 6


def test_missing_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert load_config(None, explicit=False) is None  # no ./torch-upgrade-check.yml: no config, not an error
    with pytest.raises(UsageError) as e:
        load_config(tmp_path / "nope.yml", explicit=True)
    assert e.value.problems == (f"config file {tmp_path / 'nope.yml'} not found; pass --config the path of a "
                                f"torch-upgrade-check.yml, or run 'torch-upgrade-check init' to write one",)
    with pytest.raises(UsageError, match="is a folder"):
        load_config(tmp_path, explicit=True)
    (tmp_path / "torch-upgrade-check.yml").write_text("version: 1\nsuite: none\n")
    found = load_config(None, explicit=False)
    assert found is not None and found.suite == ()


def test_not_utf8_is_one_problem(tmp_path: Path) -> None:
    path = tmp_path / "cfg.yml"
    path.write_bytes(b"version: 1\nsuite: \xff\n")
    with pytest.raises(UsageError) as e:
        load_config(path, explicit=True)
    assert len(e.value.problems) == 1 and e.value.problems[0].startswith(f"cannot read config file {path}: ")


def test_defaults(tmp_path: Path) -> None:
    path = tmp_path / "cfg.yml"
    path.write_text("version: 1\nworkloads:\n  - name: tiny\n    factory: pkg.models:build\n")
    cfg = load_config(path, explicit=True)
    assert cfg == Config(path=path, suite=suite.BUILTIN_NAMES, thresholds=Thresholds(), workloads=cfg.workloads)
    (w,) = cfg.workloads
    assert (w.aspects, w.dtypes, w.rtol, w.max_latency_ms, w.line) == (DEFAULT_ASPECTS, ("float32",), None, {}, 3)
    planned = cfg.workloads_for_suite()
    assert planned[:-1] == list(suite.BUILTIN)
    trained = ("numerics", "cross-backend", "compile", "determinism", "checkpoint", "training-curve", "amp", "dataloader",
               "latency", "memory", "warnings")  # the built-ins' trained aspects, and the dataloader check
    assert planned[-1] == suite.Workload("tiny", ("float32",), trained, "pkg.models:build (cfg.yml:3)", "pkg.models:build")
    assert CROSS_VERSION in cfg.workloads_for_suite(cross_version=True)[-1].aspects
    assert cfg.tolerances_for("tiny") == {} and cfg.tolerances_for("mlp") == {}
    assert cfg.latency_limits("cpu") == {} and cfg.pytest is None and cfg.python_path == ()


def test_overrides_and_precedence(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    path = tmp_path / "cfg.yml"
    path.write_text(
        "version: 1\nsuite: [sdpa, mlp, mlp]\npython-path: src\n"
        "thresholds: {rtol: 1e-4, atol: 1.0e-5, max-latency-regression: 15%, max-memory-regression: 0.2}\n"
        "workloads:\n"
        "  - {name: a, factory: 'p.m:a', aspects: [latency, numerics], dtypes: [bfloat16, float32], rtol: 1.0e-2,\n"
        "     max-latency-ms: {cpu: 80, cuda: 4}}\n"
        "  - {name: b, factory: 'p.m:b', aspects: [cross-version], max-latency-ms: 12}\n"
        "pytest:\n  args: [tests/, -k, not slow, -n, 4]\n")
    cfg = load_config(path, explicit=True)
    assert cfg.suite == ("mlp", "sdpa")  # suite order, duplicates dropped
    assert [w.name for w in cfg.workloads_for_suite()] == ["mlp", "sdpa", "a"]  # b has only cross-version
    assert [w.name for w in cfg.workloads_for_suite(cross_version=True)] == ["mlp", "sdpa", "a", "b"]
    a = cfg.workload("a")
    assert a.aspects == ("numerics", "latency") and a.dtypes == ("float32", "bfloat16")  # canonical order
    assert cfg.thresholds == Thresholds(1e-4, 1e-5, 0.15, 0.2)  # 1e-4 is text in YAML 1.1; accepted as a number
    assert cfg.tolerances_for("a") == {"rtol": 1e-2, "atol": 1e-5}  # workload > thresholds
    assert cfg.tolerances_for("mlp") == {"rtol": 1e-4, "atol": 1e-5}
    assert cfg.tolerances_for("a", rtol=0.5) == {"rtol": 0.5, "atol": 1e-5}  # CLI > workload
    assert cfg.latency_limits("cpu") == {"a": 80.0, "b": 12.0}
    assert cfg.latency_limits("mps") == {"b": 12.0}
    assert cfg.python_path == ("src",) and cfg.resolved_python_path() == [str(tmp_path / "src")]
    assert (cfg.threads, cfg.ab_budget, cfg.undecided) == (None, None, None)  # unset: the flags' defaults apply
    assert cfg.pytest.args == ("tests/", "-k", "not slow", "-n", "4") and cfg.root == tmp_path


def test_the_run_keys_of_compare_load(tmp_path: Path) -> None:
    path = tmp_path / "torch-upgrade-check.yml"
    path.write_text("version: 1\nthreads: 1\nab-budget: 60\nundecided: pass\n")
    cfg = load_config(path, explicit=True)
    assert (cfg.threads, cfg.ab_budget, cfg.undecided) == (1, 60.0, "pass")


def test_suite_forms(tmp_path: Path) -> None:
    path = tmp_path / "cfg.yml"
    for text, names in (("none", ()), ("[]", ()), ("builtin", suite.BUILTIN_NAMES), ("[matmul]", ("matmul",))):
        path.write_text(f"version: 1\nsuite: {text}\n")
        cfg = load_config(path, explicit=True)
        assert cfg.suite == names and [w.name for w in cfg.workloads_for_suite()] == list(names)


def test_drop_cross_version_keeps_order_and_drops_empty() -> None:
    ws = [suite.Workload("x", ("float32",), ("numerics", CROSS_VERSION, "latency")),
          suite.Workload("y", ("float32",), (CROSS_VERSION,))]
    assert drop_cross_version(ws) == [suite.Workload("x", ("float32",), ("numerics", "latency"))]


def test_example_config_loads_and_plans() -> None:
    cfg = load_config(EXAMPLE / "torch-upgrade-check.yml", explicit=True)
    assert cfg.suite == () and cfg.resolved_python_path() == [str(EXAMPLE)]
    assert [(w.name, w.factory) for w in cfg.workloads] == [
        ("tiny_classifier", "tinymodels.models:build_classifier"), ("tiny_encoder", "tinymodels.models:build_encoder")]
    specs = suite.plan(cfg.workloads_for_suite(), "cpu")
    # amp: the float32 model under autocast only; dataloader: the first dtype only (the data is the same)
    assert len(specs) == 2 * len(suite.TRAINED_ASPECTS) - 1 + 1 + 5
    assert [s.id for s in specs if s.aspect == "dataloader"] == ["tiny_classifier[float32]/dataloader"]
    assert {s.id for s in specs} >= {"tiny_classifier[bfloat16]/determinism", "tiny_encoder[float32]/compile"}
    assert cfg.tolerances_for("tiny_encoder") == {"rtol": 1e-3, "atol": 1e-5}
    assert cfg.latency_limits("cuda") == {"tiny_classifier": 20.0}
    assert cfg.pytest.args == ("tests/", "-q")


def test_example_config_matches_the_json_schema() -> None:
    validate_against_schema(EXAMPLE / "torch-upgrade-check.yml")


def test_zero_tolerances_load_and_match_the_json_schema(tmp_path: Path) -> None:
    path = tmp_path / "cfg.yml"
    path.write_text("version: 1\nthresholds: {rtol: 0, atol: 0}\n"
                    "workloads:\n  - {name: tiny, factory: 'p.m:f', rtol: 0.0, atol: 0}\n")
    assert load_config(path, explicit=True).tolerances_for("tiny") == {"rtol": 0.0, "atol": 0.0}
    validate_against_schema(path)
    jsonschema = pytest.importorskip("jsonschema")
    negative = yaml.safe_load(path.read_text().replace("rtol: 0,", "rtol: -1,"))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(negative, json.loads(SCHEMA.read_text()))


def test_compile_options_reach_every_check_of_the_workload_and_match_the_json_schema(tmp_path: Path) -> None:
    """`compile:` is how the team calls torch.compile: what is given reaches the worker as spec.params["compile"] (a
    key not given is left to torch.compile's default); a workload without it compiles as torch.compile's defaults."""
    from torch_upgrade_check.config import CompileOptions

    path = tmp_path / "torch-upgrade-check.yml"
    path.write_text("version: 1\nsuite: none\nworkloads:\n"
                    "  - name: served\n    factory: m:a\n    compile: {mode: max-autotune-no-cudagraphs, dynamic: true, "
                    "fullgraph: false, backend: inductor}\n"
                    "  - name: tuned\n    factory: m:b\n    compile:\n      options: {max_autotune: true, "
                    "'triton.cudagraphs': false, epilogue_fusion_first: 1}\n"
                    "  - name: plain\n    factory: m:c\n")
    cfg = load_config(path, explicit=True)
    served, _, plain = cfg.workloads
    assert served.compile == CompileOptions("max-autotune-no-cudagraphs", True, False, "inductor")
    assert cfg.options_for("served") == {"compile": {"mode": "max-autotune-no-cudagraphs", "dynamic": True,
                                                     "fullgraph": False, "backend": "inductor"}}
    assert cfg.options_for("tuned") == {"compile": {"options": {"max_autotune": True, "triton.cudagraphs": False,
                                                                "epilogue_fusion_first": 1}}}
    assert plain.compile == CompileOptions() and cfg.options_for("plain") == {}
    validate_against_schema(path)
    jsonschema = pytest.importorskip("jsonschema")
    both = yaml.safe_load(path.read_text())
    both["workloads"][1]["compile"]["mode"] = "max-autotune"  # torch.compile refuses mode with options
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(both, json.loads(SCHEMA.read_text()))


def test_json_schema_lists_what_the_loader_accepts() -> None:
    schema = json.loads(SCHEMA.read_text())
    props = schema["properties"]
    workload = props["workloads"]["items"]["properties"]
    assert tuple(props) == TOP_KEYS and tuple(props["thresholds"]["properties"]) == THRESHOLD_KEYS
    assert tuple(workload) == WORKLOAD_KEYS and tuple(props["pytest"]["properties"]) == PYTEST_KEYS
    assert tuple(workload["aspects"]["items"]["enum"]) == WORKLOAD_ASPECTS
    assert tuple(workload["dtypes"]["items"]["enum"]) == DTYPES
    assert tuple(workload["max-latency-ms"]["oneOf"][1]["properties"]) == DEVICES
    assert tuple(workload["compile"]["properties"]) == COMPILE_KEYS
    assert tuple(workload["compile"]["properties"]["mode"]["enum"]) == COMPILE_MODES
    assert tuple(schema["$defs"]["builtin"]["enum"]) == suite.BUILTIN_NAMES
    shipped = props["artifacts"]["items"]["properties"]
    assert tuple(shipped) == ARTIFACT_KEYS and tuple(shipped["kind"]["enum"]) == tuple(ARTIFACT_KINDS)


def test_cli_run_with_bad_config_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text("version: 1\nthresholds:\n  max-latency-regression: ten%\n")
    assert cli.main(["run", "--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err == (f"torch-upgrade-check: error: {bad}:3: thresholds.max-latency-regression must be a percentage "
                   f"like 10% or a ratio like 0.10, got 'ten%'\n")


def test_config_scaffold_and_pytest_passthrough_import_without_torch() -> None:
    code = ("import sys; sys.modules['torch'] = None\n"
            "from torch_upgrade_check import config\nfrom torch_upgrade_check.commands import init\n"
            "from torch_upgrade_check.hostchecks import pytest_passthrough\n"
            "print('ok')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert (proc.returncode, proc.stdout.strip()) == (0, "ok"), proc.stderr


@pytest.mark.parametrize(("key", "modes", "problem"), [
    ("jit", ("script", "trace"), "must be script (torch.jit.script) or trace (torch.jit.trace on the workload's inputs)"),
    ("onnx", ("dynamo", "legacy"), "must be dynamo (dynamo=True), legacy (dynamo=False) or default (no dynamo= "
                                   "argument)"),
])
def test_jit_and_onnx_declare_how_the_artifact_is_built_and_plan_it(tmp_path: Path, key: str, modes: tuple[str, str],
                                                                    problem: str) -> None:
    path = tmp_path / "torch-upgrade-check.yml"
    path.write_text(f"version: 1\nworkloads:\n  - name: a\n    factory: m:a\n    aspects: [numerics]\n    {key}: "
                    f"{modes[0]}\n  - name: b\n    factory: m:b\n    {key}: {modes[1]}\n  - name: c\n    factory: m:c\n")
    cfg = load_config(path)
    a, b, c = cfg.workloads
    assert (a.aspects, getattr(a, key), cfg.options_for("a")) == (("numerics", key), modes[0], {key: modes[0]})
    assert b.aspects == (*DEFAULT_ASPECTS, key) and cfg.options_for("b") == {key: modes[1]}
    assert not {"export", "jit", "aoti", "onnx"} & set(c.aspects) and getattr(c, key) == ""  # opt-in: what it ships
    path.write_text(f"version: 1\nworkloads:\n  - name: a\n    factory: m:a\n    {key}: compile\n")
    with pytest.raises(UsageError) as e:
        load_config(path)
    assert e.value.problems == (f"{path}:5: workloads[0].{key} {problem}, got 'compile'",)


def test_artifacts_lists_the_files_a_team_ships_each_a_check_and_every_problem_named(tmp_path: Path) -> None:
    for name in ("ckpt.pt", "program.pt2", "model.onnx", "scripted.pt"):
        (tmp_path / name).write_bytes(b"")
    path = tmp_path / "torch-upgrade-check.yml"
    path.write_text("version: 1\nsuite: none\nartifacts:\n  - {name: ckpt, file: ckpt.pt}\n"
                    "  - {name: program, file: program.pt2, inputs: 'm:inputs'}\n"
                    "  - {name: onnx_model, file: model.onnx, factory: 'm:build'}\n"
                    "  - {name: scripted, file: scripted.pt, kind: jit, inputs: 'm:inputs'}\n")
    cfg = load_config(path)
    assert [(a.name, a.kind) for a in cfg.artifacts] == [("ckpt", "checkpoint"), ("program", "export"),
                                                         ("onnx_model", "onnx"), ("scripted", "jit")]
    assert [s.id for s in suite.plan(cfg.workloads_for_suite(), "cpu")] == [
        "ckpt[-]/artifact", "program[-]/artifact", "onnx_model[-]/artifact", "scripted[-]/artifact"]
    assert cfg.options_for("program") == {"file": str(tmp_path.resolve() / "program.pt2"), "kind": "export",
                                          "inputs": "m:inputs"}
    validate_against_schema(path)
    path.write_text("version: 1\nworkloads:\n  - {name: ckpt, factory: 'm:build'}\nartifacts:\n"
                    "  - {name: ckpt, file: ckpt.pt}\n  - {name: gone, file: gone.pt}\n"
                    "  - {name: program, file: program.pt2}\n  - {name: odd, file: ckpt.pt, kind: pickle}\n")
    with pytest.raises(UsageError) as e:
        load_config(path)
    assert e.value.problems == (
        f"{path}:5: artifacts[0].name 'ckpt' is already used by workloads[0] (line 3); choose another name",
        f"{path}:6: artifacts[1].file: no file 'gone.pt' in {tmp_path.resolve()}; give its path relative to this config",
        f"{path}:7: artifacts[2]: the export file runs on inputs: add 'inputs: MODULE:FUNCTION' (returns the inputs) or "
        "'factory: MODULE:FUNCTION' (returns the model and its inputs)",
        f"{path}:8: artifacts[3].kind must be one of checkpoint, export, aoti, jit, onnx, got 'pickle'")
