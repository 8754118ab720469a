"""The `init` command: a commented starter config and a caller workflow (with --canary, the canary workflow) written
into a repository, never overwriting."""

from __future__ import annotations

from pathlib import Path

from torch_upgrade_check.commands.canary_workflow import CANARY_PATH, DEFAULT_ACTION, canary_template
from torch_upgrade_check.commands.common import say
from torch_upgrade_check.commands.settings import InitSettings
from torch_upgrade_check.errors import EXIT_PASSED, UsageError

CONFIG_PATH = Path("torch-upgrade-check.yml")
WORKFLOW_PATH = Path(".github/workflows/torch-upgrade-check.yml")

STARTER_CONFIG = """\
# torch-upgrade-check: which workloads to check when PyTorch is upgraded, and how strictly.
# Written by `torch-upgrade-check init`; edit freely. Every key is optional except `version`.
version: 1

# Built-in workloads: builtin (all of them), none, or a list such as [mlp, transformer_block, sdpa].
suite: builtin

# Folders prepended to sys.path in the worker, to import your factories from (relative to this file).
# python-path: [src]

# Defaults for every check; command-line flags and action inputs override them.
thresholds:
  # rtol: 1.0e-4                 # correctness tolerances (default: torch.testing's, per dtype)
  # atol: 1.0e-5
  max-latency-regression: 10%    # compare: fail when a workload gets slower than this, significantly
  max-memory-regression: 20%     # compare: the same for peak memory
  # max-compile-time-regression: 25%   # compare --compile-time: the same for cold compiles

# Your own models. A factory returns (model, inputs) or a mapping {model, inputs, loss, tolerances,
# checkpoint_extra, dynamic_shapes, dynamic_inputs (inputs of other sizes: one set, or a list of sets)}; if it takes
# device= and dtype= keyword arguments it is called with them.
workloads: []
#  - name: my_model
#    factory: mypkg.models:build_my_model   # MODULE:FUNCTION, imported in the worker
#    aspects: [numerics, cross-backend, cross-version, compile, determinism, checkpoint, training-curve, amp, latency,
#              memory, warnings]
#    dtypes: [float32, bfloat16]
#    rtol: 1.0e-4                           # per-workload overrides of thresholds
#    max-latency-ms: {cpu: 80, cuda: 4, mps: 12}
#    allow-graph-breaks: false              # true: compare accepts graph breaks new in the candidate
#    training-steps: 50                     # steps of training-curve
#    compile: {mode: max-autotune-no-cudagraphs, dynamic: true}   # how your code calls torch.compile
#    # shipped compiled? add the opt-in compile-cache (a second process compiles from Inductor's caches) and
#    # compiled-latency (the compiled model's latency, A/B in compare) to aspects

# Your own tests, run with the torch under test; their results join the report.
# pytest:
#   args: [tests/, -k, "not slow"]
"""

CALLER_WORKFLOW = """\
# Checks the torch pinned in a pull request against the base branch's, on this runner, before it is merged.
# The README's quick start, workflows/torch-upgrade-check.yml and `torch-upgrade-check init` write this same file.
name: torch upgrade check

on:
  pull_request:
    paths:
      - "requirements*.txt"
      - "torch-upgrade-check.yml"
      - ".github/workflows/torch-upgrade-check.yml"

permissions: {{}}

concurrency:
  group: torch-upgrade-check-${{{{ github.event.pull_request.number }}}}
  cancel-in-progress: true

jobs:
  torch:
    name: torch upgrade check
    runs-on: ubuntu-latest  # CPU only; a GPU needs a self-hosted runner: README, "Self-hosted GPU and Mac runners"
    timeout-minutes: 60
    permissions:
      contents: read  # check out the repository; the action itself needs no token
    steps:
      - uses: actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1  # v7.0.1
        with:
          persist-credentials: false
          fetch-depth: 2  # the base branch's commit too: the baseline's pin is read there
      - uses: {action}
        with:
          candidate-torch-version: auto  # the torch pinned in this pull request (or a version: 2.14.1)
          baseline-torch-version: auto   # the torch pinned on the base branch (or a version: 2.13.0)
          requirements: requirements.txt  # where the pin is; your stack is installed beside each torch
          upload-report: true
"""


def templates(action: str = DEFAULT_ACTION) -> dict[Path, str]:
    """What `init` writes, by path relative to the repository root."""
    return {CONFIG_PATH: STARTER_CONFIG, WORKFLOW_PATH: CALLER_WORKFLOW.format(action=action)}


def init(root: Path, *, action: str = DEFAULT_ACTION, canary: bool = False) -> list[Path]:
    """Write the starter config and caller workflow under `root` (with `canary`, the canary workflow alone);
    returns the paths written.

    Writes nothing when any of them exists: one UsageError names every file in the way.
    """
    chosen = {CANARY_PATH: canary_template(action)} if canary else templates(action)
    files = {Path(root) / rel: text for rel, text in chosen.items()}
    existing = [path for path in files if path.exists() or path.is_symlink()]
    if existing:
        raise UsageError(*(f"{path} already exists; init never overwrites: delete or move it, then run init again"
                           for path in existing))
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("x", encoding="utf-8") as f:  # "x": fail rather than overwrite a file made meanwhile
            f.write(text)
    return list(files)


def execute(s: InitSettings) -> int:
    for path in init(Path(s.dir), canary=s.canary):
        say(f"wrote {path}")
    if not s.canary:
        say("a nightly canary of the next torch, with history and trends, too? torch-upgrade-check init --canary")
    return EXIT_PASSED
