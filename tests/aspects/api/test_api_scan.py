"""The api check's scan (pure ast: aliases, chains, from-imports, config keys) and its verdicts (no torch)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import load_report, results_by_id, run_cli

from torch_upgrade_check.aspects.api import host as apiscan
from torch_upgrade_check.aspects.api import host_lint as lint
from torch_upgrade_check.errors import UsageError

SOURCE = """\
import torch
import torch.nn.functional as F
from torch import nn
from torch._dynamo import config
import torch._inductor.config as inductor_config
from torch.ao.quantization import quantize_fx as qfx


def f(x):
    y = F.relu(torch.ones(2)).sum()
    nn.Linear(2, 2)
    torch._dynamo.config.cache_size_limit = 8
    with config.patch(suppress_errors=True), inductor_config.patch("max_autotune", True):
        pass
    with inductor_config.patch({"freezing": True}):
        qfx.prepare_fx(x)
    return y.item()
"""


def test_the_scan_resolves_aliases_chains_from_imports_and_config_keys() -> None:
    uses = apiscan.scan_source(SOURCE, "team/m.py").uses
    assert uses["torch.nn.functional.relu"] == ["team/m.py:10"]
    assert uses["torch.ones"] == ["team/m.py:10"]
    assert uses["torch.nn.Linear"] == ["team/m.py:11"]
    assert uses["torch._dynamo.config.cache_size_limit"] == ["team/m.py:12"]  # an assigned config key
    assert uses["torch._dynamo.config.suppress_errors"] == ["team/m.py:13"]  # config.patch(key=...)
    assert uses["torch._inductor.config.max_autotune"] == ["team/m.py:13"]  # config.patch("key", ...)
    assert uses["torch._inductor.config.freezing"] == ["team/m.py:15"]  # config.patch({"key": ...})
    assert uses["torch.ao.quantization.quantize_fx.prepare_fx"] == ["team/m.py:16"]
    assert uses["torch._dynamo.config"] == ["team/m.py:4"]  # the from-import itself
    assert "torch.nn.functional" in uses and "torch._inductor.config" in uses
    # a chain is kept whole, not each prefix; methods of results are no torch names
    assert "torch._dynamo" not in uses and not any(n.endswith((".sum", ".item")) for n in uses)


def test_the_scan_dedupes_names_and_keeps_every_line(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("import torch\ntorch.zeros(1)\ntorch.zeros(2)\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "b.py").write_text("import torch as t\nt.zeros(3)\n")
    (tmp_path / "pkg" / "broken.py").write_text("def (:\n")  # does not parse: scanned as nothing
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / "c.py").write_text("import torch\ntorch.venv_only()\n")
    uses = apiscan.scan([str(tmp_path)], relative_to=tmp_path).uses
    assert uses == {"torch.zeros": ["a.py:2", "a.py:3", "pkg/b.py:2"]}


def test_a_scan_path_that_does_not_exist_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="--scan 'nope': no such file or folder"):
        apiscan.check_roots(["nope"])
    proc = run_cli("compare", "--candidate", "current", "--only", "api", "--scan", str(tmp_path / "gone"),
                   "--out", str(tmp_path / "out"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[0].endswith("no such file or folder; pass a folder of your Python code "
                                                        "(like src) or a .py file"), proc.stderr


def _answers(**names: dict) -> dict:
    return {"torch": "2.x", "names": names}


def test_the_verdicts_gone_fails_new_warning_and_lost_parameter_are_suspicious_typos_not_judged() -> None:
    uses = {"torch.a": ["m.py:1"], "torch.b": ["m.py:2"], "torch.c": ["m.py:3"], "torch.typo": ["m.py:4", "n.py:9"]}
    base = _answers(**{"torch.a": {"exists": True, "warns": []},
                       "torch.b": {"exists": True, "warns": [], "parameters": ["x", "y"]},
                       "torch.c": {"exists": True, "warns": []},
                       "torch.typo": {"exists": False, "missing": "torch.typo", "warns": []}})
    gone = _answers(**{**base["names"], "torch.a": {"exists": False, "missing": "torch.a", "warns": []}})
    got = apiscan.judge_sides(uses, {"baseline": base, "candidate": gone}, device="cpu", repro="", baseline_label="2.12")
    assert got["candidate"].outcome.value == "failed"
    assert "torch.a at m.py:1: torch.a does not exist" in got["candidate"].reason
    assert got["baseline"].outcome.value == "passed"
    changed = _answers(**{**base["names"], "torch.b": {"exists": True, "warns": [], "parameters": ["x"]},
                          "torch.c": {"exists": True, "warns": ["FutureWarning: c is deprecated"]}})
    got = apiscan.judge_sides(uses, {"baseline": base, "candidate": changed}, device="cpu", repro="")["candidate"]
    assert got.outcome.value == "suspicious", got.reason
    assert "torch.b at m.py:2 lost parameters y" in got.reason and "torch.c at m.py:3 now warns: FutureWarning" in got.reason
    same = apiscan.judge_sides(uses, {"baseline": base, "candidate": base}, device="cpu", repro="")["candidate"]
    assert same.outcome.value == "passed" and "torch.typo at m.py:4, n.py:9" in same.reason
    alone = apiscan.judge_sides(uses, {"candidate": gone}, device="cpu", repro="")["candidate"]
    assert alone.outcome.value == "suspicious" and "no baseline says" in alone.reason


def test_api_is_opt_in_scan_paths_or_only_api_with_the_python_path(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from torch_upgrade_check import cli
    from torch_upgrade_check.commands import settings

    monkeypatch.chdir(tmp_path)  # no ./torch-upgrade-check.yml is read

    def roots(only: list[str], *flags: str) -> list[str]:
        argv = ["run", *flags]
        return apiscan.scan_roots(settings.build(cli.build_parser().parse_args(argv), argv), only)

    assert roots([]) == [] and roots([], "--python-path", str(tmp_path)) == []  # the default suite never scans
    assert roots([], "--scan", str(tmp_path)) == [str(tmp_path)]
    assert roots(["api"], "--python-path", str(tmp_path)) == [str(tmp_path.resolve())]
    assert roots(["numerics"], "--scan", str(tmp_path)) == []  # --only leaves api out


TEAM_OLD_API = """\
import torch


def train(a, path):
    w = torch.load(path)
    return torch.symeig(a), w
"""


def test_torchfix_names_a_removed_function_making_a_pass_suspicious_and_lists_its_advice(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """TorchFix itself (no torch needed: it reads the source) over the team's files; a venv under the root is
    never linted."""
    (tmp_path / "team" / ".venv" / "lib").mkdir(parents=True)
    (tmp_path / "team" / "train.py").write_text(TEAM_OLD_API)
    (tmp_path / "team" / ".venv" / "lib" / "vendored.py").write_text("import torch\ntorch.symeig(1)\n")
    monkeypatch.chdir(tmp_path)
    advice, note = apiscan.torchfix(["team"])
    assert note == ""
    assert [(a.code, a.where) for a in advice] == [("TOR001", "team/train.py:6"), ("TOR102", "team/train.py:5")]
    uses = {"torch.symeig": ["team/train.py:6"], "torch.load": ["team/train.py:5"]}
    answers = _answers(**{"torch.symeig": {"exists": False, "missing": "torch.symeig", "warns": []},
                          "torch.load": {"exists": True, "warns": []}})
    passed = apiscan.judge_sides(uses, {"baseline": answers, "candidate": answers}, device="cpu", repro="")["candidate"]
    assert passed.outcome.value == "passed"
    got = apiscan.with_advice(passed, advice, note)
    assert got.outcome.value == "suspicious", got.reason
    assert "TorchFix: your code uses functions torch removed: TOR001 at team/train.py:6: Use of removed function " \
           "torch.symeig" in got.reason
    assert "TorchFix advises: TOR102 at team/train.py:5: `torch.load` without `weights_only`" in got.reason
    assert [a["code"] for a in got.metrics["torchfix"]] == ["TOR001", "TOR102"]
    # advice alone never changes a pass; a failure stays a failure
    assert apiscan.with_advice(passed, advice[1:], "").outcome.value == "passed"
    failed = apiscan.judge_sides(uses, {"baseline": _answers(**{**answers["names"], "torch.symeig": {"exists": True}}),
                                  "candidate": answers}, device="cpu", repro="")["candidate"]
    assert apiscan.with_advice(failed, advice, note).outcome.value == "failed"


def test_torchfix_output_lines_are_parsed_and_its_diffs_left_out(tmp_path: Path) -> None:
    out = (f"{tmp_path}/m.py:3:9: TOR101 [*] Use of deprecated function torch.chain_matmul\n"
           f"--- {tmp_path}/m.py\n+++ {tmp_path}/m.py\n@@ -1,3 +1,3 @@\n-    torch.chain_matmul(a, b)\n")
    assert apiscan.parse_torchfix(out, relative_to=tmp_path) == [
        apiscan.Advice("TOR101", "m.py:3", "Use of deprecated function torch.chain_matmul")]


def test_run_scan_reports_torchfix_on_the_teams_files_beside_the_live_answers(tmp_path: Path, torch_python: str) -> None:
    (tmp_path / "team").mkdir()
    (tmp_path / "team" / "train.py").write_text(TEAM_OLD_API)
    proc = run_cli("run", "--python", torch_python, "--scan", "team", "--only", "api", "--device", "cpu",
                   "--out", str(tmp_path / "out"), "--no-job-summary", cwd=tmp_path)
    api = results_by_id(load_report(tmp_path / "out"))["stack[-]/api"]
    assert proc.returncode == 0 and api["outcome"] == "suspicious", proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "TOR001 at team/train.py:6: Use of removed function torch.symeig" in api["reason"], api["reason"]
    assert "TorchFix TOR102 at team/train.py:5" in api["details"]


GUARDED = """\
import torch
from packaging import version

try:
    from torch._C import _gone_a
except (ValueError, ImportError):
    _gone_a = None

if hasattr(torch._C, "_gone_b"):
    torch._C._gone_b(True)
else:
    torch._C._gone_b_fallback(True)

setter = getattr(torch._C, "_gone_c", None)

if version.parse(torch.__version__) >= version.parse("2.14"):
    torch._C._gone_d_new()
else:
    torch._C._gone_d(True)

TORCH_VERSION = tuple(int(x) for x in torch.__version__.split(".")[:2])
flag = torch._C._gone_e if TORCH_VERSION < (2, 14) else None
ok = hasattr(torch._C, "_gone_f") and torch._C._gone_f()
if not hasattr(torch._C, "_gone_g"):
    pass
else:
    torch._C._gone_g()
"""

UNGUARDED = """\
import torch

try:
    from torch._C import _gone_a
except ImportError:
    raise RuntimeError("needs a torch with _gone_a")
try:
    torch._C._gone_b(True)
except ValueError:
    pass
if hasattr(torch._C, "_something_else"):
    torch._C._gone_b(False)
if not hasattr(torch._C, "_gone_g"):
    torch._C._gone_g()
if hasattr(model, "_gone_b"):
    torch._C._gone_b()
try:
    torch._C._gone_e()
except ImportError:
    pass
setter = getattr(torch._C, "_gone_c")
"""


def test_each_guard_form_is_named_on_its_use_and_the_same_names_unguarded_are_not() -> None:
    got = apiscan.scan_source(GUARDED, "team/amp_compat.py")
    assert got.guards["torch._C._gone_a"] == {"team/amp_compat.py:5": "try/except ImportError"}
    assert got.guards["torch._C._gone_b"] == {"team/amp_compat.py:10": "hasattr(torch._C, '_gone_b')"}
    assert got.guards["torch._C._gone_c"] == {"team/amp_compat.py:14": "getattr with a default"}
    assert got.guards["torch._C._gone_d"]["team/amp_compat.py:19"].startswith("a torch version check (version.parse(")
    assert got.guards["torch._C._gone_d_new"]["team/amp_compat.py:17"].startswith("a torch version check")
    assert got.guards["torch._C._gone_e"] == {"team/amp_compat.py:22": "a torch version check (TORCH_VERSION < (2, 14))"}
    assert got.guards["torch._C._gone_f"] == {"team/amp_compat.py:23": "hasattr(torch._C, '_gone_f')"}
    assert got.guards["torch._C._gone_g"] == {"team/amp_compat.py:27": "hasattr(torch._C, '_gone_g')"}  # the else
    assert "torch._C._gone_b_fallback" not in got.guards  # the else of a positive hasattr is the fallback itself
    bare = apiscan.scan_source(UNGUARDED, "team/train.py")
    # a handler that only raises or passes, another exception, another attribute, the wrong branch, no default
    assert bare.guards == {}, bare.guards
    assert {"torch._C._gone_a", "torch._C._gone_b", "torch._C._gone_c", "torch._C._gone_e",
            "torch._C._gone_g"} <= set(bare.uses)


def test_a_name_gone_whose_every_use_is_guarded_is_suspicious_naming_the_guard_one_bare_use_fails_it(
        tmp_path: Path) -> None:
    (tmp_path / "amp_compat.py").write_text(GUARDED)
    both = apiscan.scan([str(tmp_path)], relative_to=tmp_path)
    names = sorted(both.uses)
    base = _answers(**{n: {"exists": True, "warns": []} for n in names})
    cand = _answers(**{**base["names"], "torch._C._gone_a": {"exists": False, "missing": "torch._C._gone_a"}})
    got = apiscan.judge_sides(both.uses, {"baseline": base, "candidate": cand}, device="cpu", repro="",
                        baseline_label="2.13.0", guards=both.guards)["candidate"]
    assert got.outcome.value == "suspicious", got.reason
    assert got.reason.startswith("1 torch name your code uses exists with baseline 2.13.0 and not here, every use "
                                 "guarded by your code"), got.reason
    assert "amp_compat.py:5: guarded by try/except ImportError" in got.reason
    assert got.metrics["gone"] == [] and got.metrics["gone_guarded"] == ["torch._C._gone_a"]
    (tmp_path / "train.py").write_text(UNGUARDED)
    both = apiscan.scan([str(tmp_path)], relative_to=tmp_path)
    got = apiscan.judge_sides(both.uses, {"baseline": base, "candidate": cand}, device="cpu", repro="",
                        baseline_label="2.13.0", guards=both.guards)["candidate"]
    assert got.outcome.value == "failed", got.reason
    assert "torch._C._gone_a at train.py:4 (1 more use guarded): torch._C._gone_a does not exist" in got.reason
    same = apiscan.judge_sides(both.uses, {"baseline": base, "candidate": base}, device="cpu", repro="",
                         guards=both.guards)["candidate"]
    assert same.outcome.value == "passed", same.reason


RULE_SOURCES = {  # one file a default TorchFix rule reports on, and files none of them can
    "removed.py": "import torch\n\ndef f(a):\n    return torch.symeig(a)\n",
    "typo.py": "import torch\n\ndef f(x):\n    x.require_grad = True\n",
    "ckpt.py": "import torch\nfrom torch.utils.checkpoint import checkpoint\n\ndef f(m, x):\n    return checkpoint(m, x)\n",
    "load.py": "import torch\n\nw = torch.load('w.pt')\n",
    "collate.py": "import torch\nfrom torch.utils.data._utils.collate import default_collate\n",
    "log.py": "import torch\n\ndef f(x):\n    return torch.log(1 + x)\n",
    "exp.py": "import torch as t\n\ndef f(x):\n    return t.exp(x) - 1\n",
    "vision.py": ("import torch\nimport torchvision.models as models\nfrom torchvision.models import resnet50\n"
                  "m = resnet50(pretrained=True)\n"),
    "alias.py": "from torch import load as read\n\nw = read('w.pt')\n",  # found through the alias
    "plain.py": "import torch\n\ndef f(x):\n    return torch.relu(x) + torch.ones(2)\n",
    "builtin.py": "import torch\nimport numpy as np\n\nfor i in range(3):\n    y = np.log(1 + i)\n",
    "log_exp.py": "import torch\n\ndef f(x):\n    return torch.log(x) + torch.exp(x - 1)\n",  # neither shape
    "vision_v2.py": "import torch\nfrom torchvision.transforms.v2 import functional as F\n\nF.hflip(torch.ones(1))\n",
    "model.py": "import torch\nfrom torch import nn\n\nclass M(nn.Module):\n    def forward(self, x):\n        return x * 2\n",
    "no_torch.py": "def load(x):\n    return x\n",
}


UNMATCHED = {"plain.py", "model.py", "no_torch.py", "builtin.py", "log_exp.py", "vision_v2.py"}  # look-alikes


def test_the_triggers_name_every_default_rule_of_the_installed_torchfix() -> None:
    """TRIGGERS was read from TorchFix 0.7.0's visitors: a TorchFix with another default rule must not be
    prefiltered by words that do not cover it (rule_names then lints every file)."""
    from torchfix import torchfix as tf

    default = set(tf.GET_ALL_ERROR_CODES()) - set(tf.expand_error_codes(tuple(tf.DISABLED_BY_DEFAULT)))
    assert set(lint.TRIGGERS) == default
    assert {"torch.symeig", "torch.solve", "torch.load", "torch.utils.checkpoint.checkpoint"} <= set(lint.rule_names() or ())


def test_torchfix_lints_only_the_files_a_rule_could_match_and_finds_all_it_finds_on_every_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, text in RULE_SOURCES.items():
        (tmp_path / "team" / name).parent.mkdir(exist_ok=True)
        (tmp_path / "team" / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    files = apiscan.python_files(["team"])
    kept = {p.name for p in lint.worth_linting(files, lint.rule_names())}
    assert kept == set(RULE_SOURCES) - UNMATCHED
    every = subprocess.run([sys.executable, "-m", "torchfix", "-j", "1", *map(str, files)], capture_output=True,
                           text=True, check=False)
    reference = apiscan.parse_torchfix(every.stdout)
    advice, note = apiscan.torchfix(["team"])
    assert note == "" and advice == reference
    assert {a.where.split(":")[0].removeprefix("team/") for a in advice} == set(RULE_SOURCES) - UNMATCHED, advice  # each rule's file found, so the sources test the rules
