"""A team's repository with a torch-bump pull request, made in the test: the stack every team has (torch pinned,
torchvision and timm in a `-r` include), its own torchvision and timm models, and the branches a pull request
brings. Used by tests/test_team_pull_request.py (the CLI) and tests/action/test_quick_start_pr.py (act)."""

from __future__ import annotations

import subprocess
from pathlib import Path

MODELS = '''\
"""The team's models: a torchvision classifier and a timm ResNet, built without pretrained weights."""

import timm
import torch
import torchvision


def mobilenet():
    model = torchvision.models.mobilenet_v3_small(weights=None, num_classes=10).eval()
    return model, (torch.randn(2, 3, 64, 64),)


def resnet10t():
    model = timm.create_model("resnet10t", pretrained=False, num_classes=10).eval()
    return model, (torch.randn(2, 3, 64, 64),)
'''

CONFIG = """\
version: 1
suite: none
python-path: [.]
workloads:
  - name: mobilenet
    factory: team_models:mobilenet
    aspects: [numerics, cross-version]
    dtypes: [float32]
  - name: resnet10t
    factory: team_models:resnet10t
    aspects: [numerics, cross-version]
    dtypes: [float32]
"""


# the team repository: timm's resnet18 and vit_tiny and torchvision's mobilenet_v3_small (used by
# tests/test_real_repositories.py, each side installed from the index alone)
THREE_MODELS = '''\
"""The team's models: timm's resnet18 and vit_tiny, torchvision's mobilenet_v3_small, without pretrained weights."""

import timm
import torch
import torchvision


def resnet18():
    model = timm.create_model("resnet18", pretrained=False, num_classes=10).eval()
    return model, (torch.randn(2, 3, 64, 64),)


def vit_tiny():
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=10, img_size=64).eval()
    return model, (torch.randn(2, 3, 64, 64),)


def mobilenet():
    model = torchvision.models.mobilenet_v3_small(weights=None, num_classes=10).eval()
    return model, (torch.randn(2, 3, 64, 64),)
'''

THREE_CONFIG = "version: 1\nsuite: none\npython-path: [.]\nworkloads:\n" + "".join(
    f"  - name: {name}\n    factory: team_models:{name}\n    aspects: [numerics, cross-version]\n    dtypes: [float32]\n"
    for name in ("resnet18", "vit_tiny", "mobilenet"))


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main",
                           *args], cwd=repo, check=True, capture_output=True, text=True).stdout


def commit(repo: Path, message: str, files: dict[str, str]) -> None:
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git(repo, "add", ".")
    git(repo, "commit", "-qm", message)


def branched(repo: Path, main: dict[str, str], branches: dict[str, dict[str, str]]) -> Path:
    """A new repository at `repo`: `main`'s files committed on main, then each of `branches` a branch off main with
    one commit of its files (a pull request's). Left on the last branch."""
    repo.mkdir(parents=True)
    git(repo, "init", "-q")
    commit(repo, "main's stack", main)
    for name, files in branches.items():
        git(repo, "checkout", "-qb", name, "main")
        commit(repo, f"{name}'s change", files)
    return repo


def pins(torch: str, torchvision: str) -> dict[str, str]:
    return {"requirements.txt": f"torch=={torch}\n-r requirements-models.txt\n",
            "requirements-models.txt": f"torchvision=={torchvision}\ntimm==1.0.31\n"}


def make(repo: Path, extra: dict[str, str] | None = None, models: str = MODELS, config: str = CONFIG) -> Path:
    """main: torch 2.13.0 + torchvision 0.28.0 (and `extra` files); `bump`: 2.14.1 + 0.29.1; `torch-only`: 2.14.1,
    torchvision left behind; tag `broken`: a base whose own stack cannot resolve (torch 2.13.0, torchvision
    0.29.1). Left on `bump`."""
    repo.mkdir(parents=True)
    git(repo, "init", "-q")
    commit(repo, "the team's stack", {**pins("2.13.0", "0.28.0"), "team_models.py": models,
                                      "torch-upgrade-check.yml": config, **(extra or {})})
    git(repo, "checkout", "-qb", "bump")
    commit(repo, "bump torch and torchvision", pins("2.14.1", "0.29.1"))
    git(repo, "checkout", "-qb", "torch-only", "main")
    commit(repo, "bump torch alone", pins("2.14.1", "0.28.0"))
    git(repo, "checkout", "-qb", "broken-base", "main")
    commit(repo, "a base that does not resolve", pins("2.13.0", "0.29.1"))
    git(repo, "tag", "broken")
    git(repo, "checkout", "-q", "bump")
    return repo


def assert_models_ran(base: dict[str, dict], cand: dict[str, dict]) -> None:
    """The team's models ran under the candidate; under the baseline they ran too, or its torchvision could not load
    and the stack's checks name why. The latter is what a machine whose torch 2.13.0 is the CPU wheel (from pip's
    find-links) gets: torchvision 0.28.0 on the index is the CUDA build, whose _C.so needs libtorch_cuda's symbols
    (`operator torchvision::nms does not exist` on import). Where torch 2.13.0 comes from the index too (the CUDA
    build, as on PyPI), both sides run the models and cross-version is judged."""
    for workload in ("mobilenet", "resnet10t"):
        assert cand[f"{workload}[float32]/numerics"]["outcome"] in ("passed", "failed"), cand
    imports = base["stack[-]/imports"]
    if "torchvision (torchvision 0.28.0) raised" not in imports["reason"]:
        for workload in ("mobilenet", "resnet10t"):
            assert base[f"{workload}[float32]/numerics"]["outcome"] in ("passed", "failed"), base
            crossed = cand[f"{workload}[float32]/cross-version"]
            assert crossed["outcome"] in ("passed", "failed"), crossed
            assert crossed["metrics"]["baseline_torch"].startswith("2.13.0"), crossed
        return
    assert "RuntimeError: operator torchvision::nms does not exist" in imports["reason"], imports
    abi = base["stack[-]/abi"]
    assert abi["outcome"] == "failed" and "_C.so (torchvision 0.28.0) needs" in abi["reason"], abi
    assert "c10::cuda::" in abi["reason"], abi  # named: the CUDA symbols this CPU torch does not export
    assert cand["stack[-]/abi"]["outcome"] == cand["stack[-]/imports"]["outcome"] == "passed"
    for workload in ("mobilenet", "resnet10t"):
        assert "operator torchvision::nms does not exist" in base[f"{workload}[float32]/numerics"]["reason"]
        crossed = cand[f"{workload}[float32]/cross-version"]
        assert crossed["outcome"] == "skipped" and "the baseline saved no outputs" in crossed["reason"], crossed
