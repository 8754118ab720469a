"""The team's stack (stack.py): requirements files, pyproject.toml and lock files read as pip and uv read them."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_cli

from torch_upgrade_check import stack
from torch_upgrade_check.commands.settings import CompareSettings
from torch_upgrade_check.errors import UsageError

UV_LOCK = """\
version = 1
revision = 2
requires-python = ">=3.10"

[[package]]
name = "team-app"
version = "0.1.0"
source = { editable = "." }
dependencies = [
    { name = "requests" },
    { name = "torch" },
    { name = "torchvision" },
]

[package.optional-dependencies]
serve = [{ name = "fastapi" }]

[package.dev-dependencies]
dev = [{ name = "pytest" }]

"""
# the registry packages, as (name, version, dependencies)
LOCKED = [("torch", "2.13.0", ["sympy", "filelock"]), ("torchvision", "0.28.0", ["numpy", "torch"]),
          ("sympy", "1.13.3", ["mpmath"]), ("mpmath", "1.3.0", []), ("filelock", "3.16.1", []), ("numpy", "2.1.3", []),
          ("requests", "2.32.3", ["urllib3"]), ("urllib3", "2.2.3", []), ("fastapi", "0.115.0", []), ("pytest", "8.3.3", [])]


def _uv_package(name: str, version: str, deps: list[str]) -> str:
    edges = ", ".join(f'{{ name = "{d}" }}' for d in deps)
    return (f'\n[[package]]\nname = "{name}"\nversion = "{version}"\nsource = {{ registry = "https://pypi.org/simple" }}\n'
            + (f"dependencies = [{edges}]\n" if deps else ""))


UV_LOCK += "".join(_uv_package(*entry) for entry in LOCKED)


def _poetry_package(name: str, version: str, deps: dict[str, str]) -> str:
    table = "".join(f'{d} = "{spec}"\n' for d, spec in deps.items())
    return (f'[[package]]\nname = "{name}"\nversion = "{version}"\ndescription = ""\noptional = false\n'
            f'python-versions = ">=3.10"\nfiles = []\n' + (f"\n[package.dependencies]\n{table}" if deps else "") + "\n")


POETRY_LOCK = "".join(_poetry_package(*entry) for entry in [
    ("requests", "2.32.3", {"urllib3": ">=1.21.1,<3"}), ("urllib3", "2.2.3", {}), ("torch", "2.13.0", {"sympy": ">=1.13.3"}),
    ("sympy", "1.13.3", {}), ("torchvision", "0.28.0", {"torch": "2.13.0"})]) + """\
[metadata]
lock-version = "2.1"
python-versions = "^3.11"
content-hash = "0"
"""


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_requirements_txt_is_read_as_pip_reads_it(tmp_path: Path) -> None:
    write(tmp_path, "more/serve.txt", "fastapi>=0.110\n")
    path = write(tmp_path, "requirements-dev.txt",
                 "# the team's stack\n"
                 "numpy>=1.26  # numerics\n"
                 "requests==2.32.3 \\\n    --hash=sha256:0123\n"
                 "importlib-metadata; python_version < \"3.11\"\n"
                 "torch==2.13.0\n"
                 "torchvision==0.28.0\n"
                 "-r more/serve.txt\n")
    got = stack.load([path])
    assert got.requirements == ("numpy>=1.26", "requests==2.32.3", 'importlib-metadata; python_version < "3.11"',
                                "torchvision==0.28.0", "fastapi>=0.110")
    assert got.torch == ("torch==2.13.0",)  # set aside: each side pins its own
    assert got.sources == (str(path),)


@pytest.mark.parametrize(("line", "problem"), [
    ("--extra-index-url https://example.com/simple", "option --extra-index-url is not supported in a stack's "
                                                      "requirements; pass --extra-index-url to torch-upgrade-check instead"),
    ("-e ./vendor/pkg", "option -e is not supported"),
    ("numpy >= = 1", "'numpy >= = 1' is not a requirement pip would read"),
    ("./vendor/pkg", "'./vendor/pkg' is not a requirement pip would read"),
])
def test_a_line_pip_would_not_take_names_the_file_and_line(tmp_path: Path, line: str, problem: str) -> None:
    path = write(tmp_path, "requirements.txt", f"numpy\n{line}\n")
    with pytest.raises(UsageError) as e:
        stack.load([path])
    assert len(e.value.problems) == 1
    assert e.value.problems[0].startswith(f"{path}:2: ") and problem in e.value.problems[0]


def test_pyproject_dependencies_and_the_groups_extras_name(tmp_path: Path) -> None:
    path = write(tmp_path, "pyproject.toml", """
[project]
name = "team-app"
dependencies = ["numpy>=2", "torch>=2.12", "torchvision"]

[project.optional-dependencies]
serve = ["fastapi"]
all = ["team-app[serve]", "uvicorn"]

[dependency-groups]
test = ["pytest>=8", {include-group = "lint"}]
lint = ["pyflakes"]
""")
    assert stack.load([path]).requirements == ("numpy>=2", "torchvision")
    got = stack.load([path], ["all", "test"])
    assert got.requirements == ("numpy>=2", "torchvision", "uvicorn", "pytest>=8", "fastapi", "pyflakes")
    assert got.torch == ("torch>=2.12",)
    with pytest.raises(UsageError) as e:
        stack.load([path], ["serv"])
    assert e.value.problems == (f"{path}: no optional-dependencies or dependency-groups named serv; --extras can name "
                                "all, lint, serve, test",)


@pytest.mark.parametrize(("text", "problem"), [
    ("[tool.poetry.dependencies]\nnumpy = '*'\n", "has no [project] table (PEP 621); pass the lock file"),
    ("[project]\nname = 'x'\ndynamic = ['dependencies']\n", "its dependencies are dynamic"),
    ("[project\n", "invalid TOML"),
])
def test_a_pyproject_without_readable_dependencies_says_what_to_pass(tmp_path: Path, text: str, problem: str) -> None:
    path = write(tmp_path, "pyproject.toml", text)
    with pytest.raises(UsageError) as e:
        stack.load([path])
    assert e.value.problems[0].startswith(str(path)) and problem in e.value.problems[0]


def test_uv_lock_pins_what_the_project_reaches_without_torch(tmp_path: Path) -> None:
    got = stack.load([write(tmp_path, "uv.lock", UV_LOCK)])
    # torch's own dependencies (sympy, mpmath, filelock) come with each side's torch, in its versions
    assert got.requirements == ("fastapi==0.115.0", "numpy==2.1.3", "pytest==8.3.3", "requests==2.32.3",
                                "torchvision==0.28.0", "urllib3==2.2.3")


def test_poetry_lock_pins_what_the_project_reaches_without_torch(tmp_path: Path) -> None:
    got = stack.load([write(tmp_path, "poetry.lock", POETRY_LOCK)])
    assert got.requirements == ("requests==2.32.3", "torchvision==0.28.0", "urllib3==2.2.3")


@pytest.mark.parametrize(("name", "text", "problem"), [
    ("uv.lock", UV_LOCK.replace("version = 1\n", "version = 7\n", 1), "uv.lock version 7 is not supported"),
    ("poetry.lock", POETRY_LOCK.replace('lock-version = "2.1"', 'lock-version = "9.0"'),
     "poetry.lock lock-version '9.0' is not supported"),
])
def test_an_unsupported_lock_version_names_the_export_to_use(tmp_path: Path, name: str, text: str, problem: str) -> None:
    with pytest.raises(UsageError) as e:
        stack.load([write(tmp_path, name, text)])
    assert problem in e.value.problems[0] and "export" in e.value.problems[0]


def test_bad_files_are_exit_2_one_line_each_and_nothing_is_installed(tmp_path: Path) -> None:
    write(tmp_path, "Pipfile", "[packages]\n")
    good = write(tmp_path, "requirements.txt", "numpy\n")
    proc = run_cli("compare", "--candidate", "2.13.0", "--torch-backend", "pypi", "--venv-dir", str(tmp_path / "venvs"),
                   "--requirements", str(good), "--requirements", str(tmp_path / "missing.txt"),
                   "--requirements", str(tmp_path / "Pipfile"), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines == [
        f"torch-upgrade-check: error: requirements file {tmp_path / 'missing.txt'} not found; pass the path of a "
        "requirements*.txt, a pyproject.toml, a uv.lock, a poetry.lock, a pdm.lock, a pylock.toml or a Pipfile.lock "
        "(relative to the current folder, or to the config file for its 'requirements:')",
        f"torch-upgrade-check: error: requirements file {tmp_path / 'Pipfile'} is not a requirements*.txt, a "
        "pyproject.toml, a uv.lock, a poetry.lock, a pdm.lock, a pylock.toml or a Pipfile.lock; pass one of those "
        "(pipenv lock writes a Pipfile.lock from a Pipfile; pip-compile a requirements.txt from a requirements.in)"]
    assert not (tmp_path / "venvs").exists()


def test_the_configs_requirements_are_relative_to_it(tmp_path: Path) -> None:
    write(tmp_path, "deps/requirements.txt", "numpy\n")
    write(tmp_path, "pyproject.toml", "[project]\nname = 'x'\ndependencies = []\n"
                                      "[project.optional-dependencies]\nserve = ['fastapi']\n")
    write(tmp_path, "torch-upgrade-check.yml", "version: 1\nrequirements: [deps/requirements.txt, pyproject.toml]\n"
                                               "extras: serve\n")
    from torch_upgrade_check.configfile.read import load_config

    cfg = load_config(tmp_path / "torch-upgrade-check.yml", explicit=True)

    assert stack.requested(cfg, [], []).requirements == ("numpy", "fastapi")


def _git(repo: Path, *args: str) -> None:
    import subprocess

    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main",
                    *args], cwd=repo, check=True, capture_output=True)


@pytest.fixture
def bump_repo(tmp_path: Path) -> Path:
    """A repository whose main pins torch 2.13.0 and whose branch `bump` pins 2.14.1 (torchvision left behind)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    write(repo, "requirements.txt", "torch==2.13.0\ntorchvision==0.28.0\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "pin")
    _git(repo, "checkout", "-qb", "bump")
    write(repo, "requirements.txt", "torch==2.14.1  # the bump\ntorchvision==0.28.0\n")
    _git(repo, "commit", "-qam", "bump torch")
    return repo


def test_auto_reads_each_sides_pin_at_its_ref_with_the_same_parsers(bump_repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from torch_upgrade_check.commands.stack_sides import Asked, auto_pins

    monkeypatch.chdir(bump_repo)
    asked = Asked(None, ("requirements.txt",), (), {"baseline": "main", "candidate": None})
    both = {"baseline": "auto", "candidate": "auto"}
    assert auto_pins(asked, both) == {"baseline": "2.13.0", "candidate": "2.14.1"}
    write(bump_repo, "requirements.txt", "torch>=2.14,<2.15\n")  # the working tree, uncommitted: a range
    assert auto_pins(asked, both)["candidate"] == "<2.15,>=2.14"


@pytest.mark.parametrize(("flags", "problem"), [
    (["--base-ref", "no-such-branch"], "--base-ref 'no-such-branch' is not a commit in this repository; fetch it"),
    (["--base-ref", "HEAD", "--requirements", "missing.txt"], "requirements file missing.txt does not exist at "
                                                               "--base-ref HEAD"),
    ([], "--baseline auto reads the torch pin at --base-ref REF; pass one"),
])
def test_auto_with_a_bad_ref_is_exit_2_naming_it(bump_repo: Path, tmp_path: Path, flags: list[str], problem: str) -> None:
    proc = run_cli("compare", "--baseline", "auto", "--candidate", "2.13.0", "--requirements", "requirements.txt",
                   "--venv-dir", str(tmp_path / "venvs"), *flags, "--out", str(tmp_path / "out"), cwd=bump_repo)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.strip()][:1]
    assert problem in line, proc.stderr
    assert not (tmp_path / "venvs").exists()


@pytest.mark.slow
def test_a_bump_that_leaves_a_companion_behind_fails_resolve_from_the_refs_alone(bump_repo: Path, tmp_path: Path) -> None:
    proc = run_cli("compare", "--baseline", "auto", "--base-ref", "main", "--candidate", "auto", "--installer", "pip",
                   "--torch-backend", "pypi", "--requirements", "requirements.txt", "--venv-dir", str(tmp_path / "venvs"),
                   "--device", "cpu", "--out", str(tmp_path / "out"), cwd=bump_repo)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    import json

    baseline, candidate = json.loads((tmp_path / "out" / "report.json").read_text())["reports"]
    assert baseline["label"].startswith("2.13.0") and candidate["label"] == "2.14.1"
    assert "torchvision 0.28.0 requires torch==2.13.0" in candidate["results"][0]["reason"]
    assert "--baseline 2.13.0 --candidate 2.14.1" in candidate["results"][0]["repro"]


@pytest.fixture
def split_repo(tmp_path: Path) -> Path:
    """main: torch 2.13.0, companions in a -r include; `bump` moves torch and torchvision together and adds a file."""
    from team_repo import commit

    repo = tmp_path / "split"
    repo.mkdir()
    _git(repo, "init", "-q")
    commit(repo, "pin", {"requirements.txt": "torch==2.13.0\n-r models.txt\n",
                         "models.txt": "torchvision==0.28.0\ntimm==1.0.31\n"})
    _git(repo, "checkout", "-qb", "bump")
    commit(repo, "bump torch and torchvision; serve", {"requirements.txt": "torch==2.14.1\n-r models.txt\n",
                                                       "models.txt": "torchvision==0.29.1\ntimm==1.0.31\n",
                                                       "requirements-serve.txt": "fastapi\n"})
    return repo


def _compare(*flags: str) -> CompareSettings:
    """compare's settings as the CLI builds them, with `--candidate auto --requirements requirements.txt` and `flags`."""
    from torch_upgrade_check import cli
    from torch_upgrade_check.commands import settings

    argv = ["compare", "--candidate", "auto", "--requirements", "requirements.txt", *flags]
    return settings.build(cli.build_parser().parse_args(argv), argv)


def test_each_side_reads_its_stack_and_includes_at_its_own_ref(split_repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from torch_upgrade_check.commands.stack_sides import stack_notes

    monkeypatch.chdir(split_repo)
    s = _compare("--baseline", "auto", "--base-ref", "main", "--requirements", "requirements-serve.txt")
    assert (s.baseline, s.candidate) == ("2.13.0", "2.14.1")
    assert s.stacks["baseline"].requirements == ("torchvision==0.28.0", "timm==1.0.31")  # the include, at main
    assert s.stacks["candidate"].requirements == ("torchvision==0.29.1", "timm==1.0.31", "fastapi")
    assert s.stacks["baseline"].absent == ("requirements-serve.txt",) and s.stack is s.stacks["candidate"]
    notes = stack_notes(s.refs, s.stacks)
    assert "baseline: the stack is requirements.txt at --base-ref main (2 requirements beside torch)" in notes
    assert ("baseline: requirements-serve.txt does not exist at --base-ref main: it is the candidate's alone"
            in notes), notes
    # --head-ref reads the candidate's files there, not the working tree's
    write(split_repo, "models.txt", "torchvision==0.29.0\n")
    s = _compare("--baseline", "auto", "--base-ref", "main", "--head-ref", "bump")
    assert s.stacks["candidate"].requirements == ("torchvision==0.29.1", "timm==1.0.31")
    # without refs, one stack from the working tree for both sides, as before (and nothing to say about it)
    s = _compare("--baseline", "2.13.0")
    assert s.stacks["baseline"] is s.stacks["candidate"] and stack_notes(s.refs, s.stacks) == []
    assert s.stack.requirements == ("torchvision==0.29.0",)


def test_an_include_missing_at_the_base_ref_names_the_file_that_includes_it(split_repo: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(split_repo)
    _git(split_repo, "checkout", "-qb", "gone", "main")
    _git(split_repo, "rm", "-q", "models.txt")
    _git(split_repo, "commit", "-qm", "include lost")
    with pytest.raises(UsageError) as e:
        _compare("--baseline", "2.13.0", "--base-ref", "gone")
    assert e.value.problems[0].startswith("requirements.txt:2: requirements file models.txt does not exist at "
                                          "--base-ref gone"), e.value.problems
