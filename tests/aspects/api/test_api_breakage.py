"""The api check against a torch broken the way it exists to catch: a private name the candidate removed
(`remove-private-attr`) fails, naming the team's file and line, unless every use is guarded by the team's code
(suspicious); the same torch on both sides passes (A/A)."""

from __future__ import annotations

from pathlib import Path

from conftest import load_report, results_by_id, run_cli
from harness import interpreter

TEAM_API = ("import torch\n"
            "from torch._dynamo import config\n"
            "\n"
            "def setup():\n"
            "    torch.backends.cuda.matmul.allow_tf32 = True\n"
            "    torch._C._set_cublas_allow_tf32(True)\n"
            "    with config.patch(suppress_errors=True):\n"
            "        return torch.nn.functional.relu(torch.ones(2))\n"
            "\n"
            "torch.team_typo()\n")


def _api(tmp_path: Path, baseline: str, candidate: str) -> tuple[int, dict, str]:
    (tmp_path / "team").mkdir()
    (tmp_path / "team" / "train.py").write_text(TEAM_API)
    proc = run_cli("compare", "--baseline-python", baseline, "--candidate-python", candidate, "--only", "api",
                   "--scan", "team", "--device", "cpu", "--out", str(tmp_path / "out"), "--no-job-summary", cwd=tmp_path)
    base, cand = load_report(tmp_path / "out")["reports"]
    return proc.returncode, results_by_id(cand)["stack[-]/api"], proc.stdout + proc.stderr


def test_the_same_torch_on_both_sides_has_every_api_name_the_team_uses(tmp_path: Path, torch_python: str) -> None:
    code, api, said = _api(tmp_path, torch_python, torch_python)
    assert code == 0 and api["outcome"] == "passed", said[-3000:]
    # a name neither torch has is the team's own: named, never failed
    assert "torch.team_typo at team/train.py:10" in api["reason"] and api["metrics"]["missing_on_both"] == ["torch.team_typo"]
    assert "torch._dynamo.config.suppress_errors" in api["metrics"]["uses"]  # a config.patch key


def test_a_private_torch_name_the_candidate_removed_fails_api_naming_its_file_and_line(tmp_path: Path,
                                                                                   torch_python: str) -> None:
    broken = str(interpreter(torch_python, tmp_path / "py", breaks=["remove-private-attr"]))
    code, api, said = _api(tmp_path, torch_python, broken)
    assert code == 1 and api["outcome"] == "failed", said[-3000:]
    assert "torch._C._set_cublas_allow_tf32 at team/train.py:6" in api["reason"], api["reason"]
    assert api["metrics"]["gone"] == ["torch._C._set_cublas_allow_tf32"]


TEAM_GUARDED = {  # the name remove-private-attr removes, reached as libraries guard it, one form a file
    "amp_compat.py": ("import torch\n"
                      "\n"
                      "try:\n"
                      "    from torch._C import _set_cublas_allow_tf32\n"
                      "except ImportError:\n"
                      "    _set_cublas_allow_tf32 = None\n"),
    "has.py": ("import torch\n"
               "\n"
               "def setup():\n"
               "    if hasattr(torch._C, '_set_cublas_allow_tf32'):\n"
               "        torch._C._set_cublas_allow_tf32(True)\n"),
    "get.py": ("import torch\n"
               "\n"
               "setter = getattr(torch._C, '_set_cublas_allow_tf32', None)\n"),
    "versioned.py": ("import torch\n"
                     "from packaging import version\n"
                     "\n"
                     "if version.parse(torch.__version__) < version.parse('2.14'):\n"
                     "    torch._C._set_cublas_allow_tf32(True)\n"
                     "else:\n"
                     "    torch.backends.cuda.matmul.allow_tf32 = True\n"),
}


def _api_team(tmp_path: Path, baseline: str, candidate: str, files: dict[str, str]) -> tuple[int, dict, str]:
    (tmp_path / "team").mkdir(exist_ok=True)
    for name, text in files.items():
        (tmp_path / "team" / name).write_text(text)
    out = tmp_path / f"out{len(list(tmp_path.glob('out*')))}"
    proc = run_cli("compare", "--baseline-python", baseline, "--candidate-python", candidate, "--only", "api",
                   "--scan", "team", "--device", "cpu", "--out", str(out), "--no-job-summary", cwd=tmp_path)
    _, cand = load_report(out)["reports"]
    return proc.returncode, results_by_id(cand)["stack[-]/api"], proc.stdout + proc.stderr


def test_a_removed_name_the_teams_code_guards_is_suspicious_naming_each_guard_unguarded_it_fails(
        tmp_path: Path, torch_python: str) -> None:
    """Each guard form (try/except ImportError with a fallback, a hasattr branch, getattr with a default, a torch
    version check) against a candidate that lacks the name: suspicious, each use named with its guard; the same name
    used once unguarded fails, naming that use; the same torch on both sides passes."""
    broken = str(interpreter(torch_python, tmp_path / "py", breaks=["remove-private-attr"]))
    code, api, said = _api_team(tmp_path, torch_python, broken, TEAM_GUARDED)
    assert code == 0 and api["outcome"] == "suspicious", said[-3000:]
    for guarded in ("team/amp_compat.py:4: guarded by try/except ImportError",
                    "team/has.py:5: guarded by hasattr(torch._C, '_set_cublas_allow_tf32')",
                    "team/get.py:3: guarded by getattr with a default",
                    "team/versioned.py:5: guarded by a torch version check (version.parse(torch.__version__) < "):
        assert guarded in api["reason"], api["reason"]
    assert api["metrics"]["gone"] == [] and api["metrics"]["gone_guarded"] == ["torch._C._set_cublas_allow_tf32"]
    code, api, said = _api_team(tmp_path, torch_python, broken,
                                {"train.py": "import torch\n\ntorch._C._set_cublas_allow_tf32(True)\n"})
    assert code == 1 and api["outcome"] == "failed", said[-3000:]
    assert "torch._C._set_cublas_allow_tf32 at team/train.py:3 (4 more uses guarded)" in api["reason"], api["reason"]
    code, api, said = _api_team(tmp_path, torch_python, torch_python, {})
    assert code == 0 and api["outcome"] == "passed", said[-3000:]
