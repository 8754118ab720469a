"""`init`: write a commented starter config and a caller workflow into a repository, never overwriting."""

from __future__ import annotations

from pathlib import Path

from torch_upgrade_check.errors import UsageError

CONFIG_PATH = Path("torch-upgrade-check.yml")
WORKFLOW_PATH = Path(".github/workflows/torch-upgrade-check.yml")
CANARY_PATH = Path(".github/workflows/torch-canary.yml")
DEFAULT_ACTION = "OWNER/torch-upgrade-check@v1"

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


# workflows/torch-canary.yml with the action named as `init` names it (a test keeps the two the same). Not a
# str.format template: the workflow's own ${{ }} expressions stay as they are.
CANARY_WORKFLOW = """\
# Canary with history: every night, check PyTorch's next release (the nightly, by default) against the torch pinned
# on your default branch, on each of your runners; keep one record a run on a branch of this repository
# (torch-upgrade-check-history), show the trend per check in the job summary with charts, and when a check steps or
# first fails, bisect between the last good and the first bad build and keep its answer with the record.
# docs/canary.md says what is recorded, how an alarm is decided and how to read the history anywhere.
#
# Written by `torch-upgrade-check init --canary` (workflows/torch-canary.yml is the same file); adapt `runners` and
# the pin file, and pin OWNER/torch-upgrade-check to a full commit SHA with its version in a comment (Dependabot
# then keeps it current). Only the `publish` job can write, and only the history branch is
# pushed to (a protected default branch stays protected). A failed scheduled run notifies whoever last edited this file.
name: torch canary

on:
  schedule:
    - cron: "17 4 * * *"  # daily, 04:17 UTC (off the hour: scheduled runs at :00 are often delayed)
  workflow_dispatch:
    inputs:
      candidate:
        description: "The torch to check: nightly, test (the release candidate), latest, or one version"
        type: string
        default: nightly
      baseline:
        description: "The torch to compare with: auto (the pin on this branch) or a version"
        type: string
        default: auto
      runners:
        description: 'Like the reusable workflow''s runners: [["ubuntu-latest"]], or {"labels": [...], "device": "cuda"}'
        type: string
        default: '[["ubuntu-latest"]]'
      checks:
        description: "Only the checks matching these (comma-separated globs); empty: the config's"
        type: string
        default: ''
      index-url:
        description: "The index torch is installed from (a mirror of PyTorch's); empty: PyTorch's for the channel"
        type: string
        default: ''

permissions: {}

concurrency:
  # one canary per candidate at a time; runs of other candidates may publish together (the pushes retry)
  group: torch-canary-${{ github.ref }}-${{ inputs.candidate || 'nightly' }}
  cancel-in-progress: false

jobs:
  canary:
    name: canary on ${{ join(startsWith(toJSON(matrix.runner), '{') && matrix.runner.labels || matrix.runner, ', ') }}
    strategy:
      fail-fast: false
      matrix:
        # a label set or an object {labels, device, python}, as the reusable workflow's `runners`
        runner: ${{ fromJSON(inputs.runners || '[["ubuntu-latest"]]') }}
    runs-on: ${{ startsWith(toJSON(matrix.runner), '{') && matrix.runner.labels || matrix.runner }}
    timeout-minutes: 180
    permissions:
      contents: read  # check out the repository and read the history branch; this job pushes nothing
    steps:
      - name: Check out
        uses: actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1  # v7.0.1
        with:
          persist-credentials: false

      # Not stopped by a failure: the run is recorded either way (a failure is what the history is for).
      - name: Compare the candidate with the pinned torch
        id: tuc
        continue-on-error: true
        uses: OWNER/torch-upgrade-check@v1
        with:
          candidate-torch-version: ${{ inputs.candidate || 'nightly' }}
          baseline-torch-version: ${{ inputs.baseline || 'auto' }}
          base-ref: HEAD  # the pin on the branch this runs on (the default branch, on schedule)
          requirements: requirements.txt
          checks: ${{ inputs.checks }}
          index-url: ${{ inputs.index-url }}
          device: ${{ startsWith(toJSON(matrix.runner), '{') && matrix.runner.device || 'auto' }}
          python: ${{ startsWith(toJSON(matrix.runner), '{') && matrix.runner.python || 'python3' }}
          fail-on: correctness  # latency and memory steps are judged from the history, not one night
          report-dir: torch-canary-report
          upload-report: true

      - name: Read the history and add this run to it
        id: history
        if: ${{ !cancelled() }}
        env:
          REPORT: ${{ steps.tuc.outputs.report }}
          STORE_BRANCH: torch-upgrade-check-history
          REMOTE: ${{ vars.TORCH_CANARY_REMOTE || format('{0}/{1}', github.server_url, github.repository) }}
          SERVER_URL: ${{ github.server_url }}
          TOKEN: ${{ github.token }}
        shell: bash
        run: |
          set -eu
          tool="$RUNNER_TEMP/torch-upgrade-check/venv/bin/torch-upgrade-check"  # the action's own install
          dir="$RUNNER_TEMP/torch-canary"
          rm -rf -- "$dir" && mkdir -p "$dir/git" "$dir/store" "$dir/record" "$dir/charts"
          if [ -z "$REPORT" ] || [ ! -f "$REPORT" ] || [ ! -x "$tool" ]; then
            rm -rf -- "$dir/record"  # nothing for the publish job from this runner
            echo "::warning title=torch canary::this runner's compare left no report (the step above says why): nothing to record"
            echo "alarm=false" >> "$GITHUB_OUTPUT"
            exit 0
          fi
          if [ -n "$TOKEN" ]; then  # read access for a private repository, through this step's environment only
            basic=$(printf 'x-access-token:%s' "$TOKEN" | base64 | tr -d '\\n')
            echo "::add-mask::$basic"
            export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0="http.$SERVER_URL/.extraheader"
            export GIT_CONFIG_VALUE_0="AUTHORIZATION: basic $basic"
          fi
          git init --quiet "$dir/git"
          if git -C "$dir/git" ls-remote --exit-code --heads "$REMOTE" "refs/heads/$STORE_BRANCH" > /dev/null; then
            git -C "$dir/git" fetch --quiet --depth 1 "$REMOTE" "refs/heads/$STORE_BRANCH"
            git -C "$dir/git" archive FETCH_HEAD | tar -x -C "$dir/store"
          fi
          "$tool" history --store "$dir/store" --append "$REPORT" --commit "$GITHUB_SHA"
          tail -n 1 "$dir/store/records.jsonl" > "$dir/record/record.jsonl"  # this run's record, for the publish job
          "$tool" history --store "$dir/store" --markdown "$dir/trend.md" --charts "$dir/charts" \\
            --alarm-output "$dir/alarm.txt"
          cat "$dir/alarm.txt" >> "$GITHUB_OUTPUT"

      # A step (or a first failure) in the history: find the first bad build between the last good one and the first
      # bad one, on this runner, with the checks that fail there (the action's bisect). Its answer joins the record.
      - name: Bisect between the last good and the first bad build
        id: bisect
        if: >-
          ${{ !cancelled() && steps.history.outputs.alarm == 'true'
          && steps.history.outputs.last-good != '' && steps.history.outputs.first-bad != '' }}
        continue-on-error: true
        uses: OWNER/torch-upgrade-check@v1
        with:
          candidate-torch-version: ${{ steps.history.outputs.first-bad }}
          baseline-torch-version: ${{ steps.history.outputs.last-good }}
          bisect: 'true'
          bisect-good: ${{ steps.history.outputs.last-good }}
          requirements: requirements.txt
          checks: ${{ inputs.checks }}
          index-url: ${{ inputs.index-url }}
          device: ${{ startsWith(toJSON(matrix.runner), '{') && matrix.runner.device || 'auto' }}
          python: ${{ startsWith(toJSON(matrix.runner), '{') && matrix.runner.python || 'python3' }}
          fail-on: correctness,latency,memory  # what a step in the history can be
          report-dir: torch-canary-bisect
          upload-report: false

      - name: Keep the bisection with this run's record
        if: ${{ !cancelled() && steps.bisect.outputs.bisect-report != '' }}
        env:
          BISECT_REPORT: ${{ steps.bisect.outputs.bisect-report }}
        shell: bash
        run: |
          set -eu
          mkdir -p "$RUNNER_TEMP/torch-canary/record/bisect"
          cp -- "$BISECT_REPORT" "$RUNNER_TEMP/torch-canary/record/bisect/report.json"

      - name: Upload the trend charts
        id: charts
        if: ${{ !cancelled() && steps.history.outcome == 'success' }}
        uses: actions/upload-artifact@bbbca2ddaa5d8feaa63e36b76fdaad77386f024f  # v7.0.0
        with:
          name: torch-canary-charts-${{ strategy.job-index }}
          path: ${{ runner.temp }}/torch-canary/charts
          if-no-files-found: ignore
          overwrite: true

      - name: Write the trend into the job summary
        if: ${{ !cancelled() && steps.history.outcome == 'success' }}
        env:
          CHARTS_URL: ${{ steps.charts.outputs.artifact-url }}
          ALARM: ${{ steps.history.outputs.alarm }}
          BISECT_OUTCOME: ${{ steps.bisect.outputs.bisect-outcome }}
          BISECT_FIRST_BAD: ${{ steps.bisect.outputs.bisect-first-bad }}
          BISECT_LAST_GOOD: ${{ steps.bisect.outputs.bisect-last-good }}
          BISECT_URL: ${{ steps.bisect.outputs.bisect-compare-url }}
        shell: bash
        run: |
          set -eu
          dir="$RUNNER_TEMP/torch-canary"
          {
            echo "## torch canary: the history"
            echo
            if [ -f "$dir/trend.md" ]; then cat "$dir/trend.md"; echo; fi
            if [ -n "$CHARTS_URL" ]; then echo "Trend charts (PNG): [download]($CHARTS_URL)"; echo; fi
            if [ "$ALARM" = true ] && [ -n "$BISECT_OUTCOME" ]; then
              builds="first bad build \\`${BISECT_FIRST_BAD:-?}\\` (last good \\`${BISECT_LAST_GOOD:-?}\\`)"
              echo "Bisection: **$BISECT_OUTCOME**, $builds ${BISECT_URL:+[the commits between]($BISECT_URL)}"
            elif [ "$ALARM" = true ]; then
              echo "Bisection: not run or no answer (see the bisect step's log)"
            fi
          } >> "$GITHUB_STEP_SUMMARY"

      - name: Upload this run's record
        if: ${{ !cancelled() && steps.history.outcome == 'success' }}
        uses: actions/upload-artifact@bbbca2ddaa5d8feaa63e36b76fdaad77386f024f  # v7.0.0
        with:
          name: torch-canary-record-${{ strategy.job-index }}
          path: ${{ runner.temp }}/torch-canary/record
          if-no-files-found: ignore
          overwrite: true

      - name: Fail when the candidate failed
        if: ${{ !cancelled() && steps.tuc.outcome != 'success' }}
        env:
          VERDICT: ${{ steps.tuc.outputs.verdict }}
        shell: bash
        run: |
          echo "torch canary: the candidate's check did not pass (verdict: ${VERDICT:-none}); the summary says what broke" >&2
          exit 1

  publish:
    name: publish the history
    needs: canary
    if: ${{ !cancelled() }}  # after a failed canary too: a failure is a record worth keeping
    runs-on: ubuntu-latest
    timeout-minutes: 15
    permissions:
      contents: write  # push the history branch: the only job that can write, and it runs none of your code
    steps:
      - name: Download every runner's record
        uses: actions/download-artifact@3e5f45b2cfb9172054b4087a40e8e0b5a5461e7c  # v8.0.1
        with:
          pattern: torch-canary-record-*
          path: records

      - name: Append them to the history branch
        uses: OWNER/torch-upgrade-check/publish-history@v1
        with:
          records: records
          remote: ${{ vars.TORCH_CANARY_REMOTE }}
"""


def canary_template(action: str = DEFAULT_ACTION) -> str:
    """The canary workflow, both of its `uses:` (the action and its publish-history sub-path) naming `action`."""
    repo, _, ref = action.partition("@")
    return (CANARY_WORKFLOW.replace("OWNER/torch-upgrade-check/publish-history@v1", f"{repo}/publish-history@{ref}")
            .replace("OWNER/torch-upgrade-check@v1", action))


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
