"""The canary workflow `init --canary` writes (workflows/torch-canary.yml with the action named as `init` names it)."""

from __future__ import annotations

from pathlib import Path

CANARY_PATH = Path(".github/workflows/torch-canary.yml")
DEFAULT_ACTION = "OWNER/torch-upgrade-check@v1"

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
          LABELS: ${{ join(startsWith(toJSON(matrix.runner), '{') && matrix.runner.labels || matrix.runner, '-') }}
          JOB_INDEX: ${{ strategy.job-index }}
          COMPARE_OUTCOME: ${{ steps.tuc.outcome }}
          CANDIDATE: ${{ inputs.candidate || 'nightly' }}
          BASELINE: ${{ inputs.baseline || 'auto' }}
        shell: bash
        run: |
          set -eu
          # this runner's artifacts' names: its labels, then its job index where there is one (act leaves it empty,
          # which named them `torch-canary-charts-`, one name for every runner), in the characters a name may have
          suffix=$(printf '%s%s' "$LABELS" "${JOB_INDEX:+-$JOB_INDEX}" | tr -c 'A-Za-z0-9._-' '_')
          echo "artifact-suffix=${suffix:-runner}" >> "$GITHUB_OUTPUT"
          tool="$RUNNER_TEMP/torch-upgrade-check/venv/bin/torch-upgrade-check"  # the action's own install
          dir="$RUNNER_TEMP/torch-canary"
          rm -rf -- "$dir" && mkdir -p "$dir/git" "$dir/store" "$dir/record" "$dir/charts"
          if [ -z "$REPORT" ] || [ ! -f "$REPORT" ] || [ ! -x "$tool" ]; then
            rm -rf -- "$dir/record"  # nothing for the publish job from this runner
            echo "::warning title=torch canary::this runner's compare left no report (the step above says why): nothing to record"
            echo "alarm=false" >> "$GITHUB_OUTPUT"
            exit 0
          fi
          py="$(dirname -- "$tool")/python"
          # A channel (nightly, test, latest) whose newest build is the very torch this branch pins: compare stops,
          # exit 2, "nothing would be compared" (for a pull request, the team's input). Here it is a night with no new
          # build: said so, nothing recorded (the series go on unbroken), and the job does not fail for it. (The same
          # channel on both sides is an A/A the team asked for: compare runs it, and its failure stays a failure.)
          same_torch='import json, sys
          labels = {r.get("label") for r in json.load(open(sys.argv[1], encoding="utf-8")).get("reports", [])}
          one = labels.pop() if len(labels) == 1 else None
          print(one or "")
          sys.exit(0 if one and one != "?" else 1)'
          case "$COMPARE_OUTCOME:$CANDIDATE" in
            failure:nightly|failure:test|failure:latest)
              if [ "$BASELINE" != "$CANDIDATE" ] && build=$("$py" -c "$same_torch" "$REPORT" 2> /dev/null); then
                rm -rf -- "$dir/record"
                line="no new build: the newest \\`$CANDIDATE\\` is torch $build, the torch this branch pins"
                line="$line; nothing compared or recorded"
                echo "::notice title=torch canary::${line//\\`/}"
                printf '%s\\n' "No new build tonight: ${line#no new build: }." > "$dir/trend.md"
                printf '%s\\n' "alarm=false" "no-new-build=true" >> "$GITHUB_OUTPUT"
                exit 0
              fi ;;
          esac
          if [ -n "$TOKEN" ]; then  # read access for a private repository, through this step's environment only
            basic=$(printf 'x-access-token:%s' "$TOKEN" | base64 | tr -d '\\n')
            echo "::add-mask::$basic"
            export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0="http.$SERVER_URL/.extraheader"
            export GIT_CONFIG_VALUE_0="AUTHORIZATION: basic $basic"
          fi
          # Change points (ruptures) and charts (matplotlib) are the tool's `history` extra, which the action's install
          # leaves out: add it to that venv, its requirements read from the installed tool's own metadata (so they
          # are pyproject's), with uv or pip as the action installed. Without it (no index) the history still alarms
          # on first failures, and its summary says what it left out.
          if ! "$py" -c 'import ruptures, matplotlib' 2> /dev/null; then
            extra=()  # read line by line: bash 3.2 (macOS runners) too
            while IFS= read -r spec; do extra+=("$spec"); done < <("$py" -c 'import importlib.metadata as m
          for r in m.requires("torch-upgrade-check") or []:
              spec, _, marker = r.partition(";")
              if "history" in marker: print(spec.strip())')
            if [ "${#extra[@]}" -eq 0 ]; then
              extra_failed=1
            elif command -v uv > /dev/null 2>&1; then
              uv pip install --quiet --python "$py" "${extra[@]}" || extra_failed=1
            else
              "$py" -m pip install --quiet --disable-pip-version-check "${extra[@]}" || extra_failed=1
            fi
            if [ -n "${extra_failed:-}" ]; then  # on a line of its own: pip's error may end without a newline
              echo
              echo "::warning title=torch canary::no history extra (${extra[*]:-}): no steps, no charts; first failures still alarm"
            fi
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
          # what bisect installs: the public versions. A build's torch.__version__ (what the history keeps) may carry a
          # local label its index's wheel does not (PyPI's CUDA 2.14.1 says 2.14.1+cu130), and `==` on the public
          # version matches the wheel with or without one (PEP 440). alarm.txt is GITHUB_OUTPUT's multi-line form
          # (name<<delimiter, the value's line, delimiter): a version is the one line after its name's
          name=''
          while IFS= read -r line; do
            if [ -n "$name" ]; then echo "$name-public=${line%%+*}" >> "$GITHUB_OUTPUT"; name=''; continue; fi
            case "$line" in last-good\\<\\<*|first-bad\\<\\<*) name="${line%%<<*}" ;; esac
          done < "$dir/alarm.txt"

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
          candidate-torch-version: ${{ steps.history.outputs.first-bad-public }}
          baseline-torch-version: ${{ steps.history.outputs.last-good-public }}
          bisect: 'true'
          bisect-good: ${{ steps.history.outputs.last-good-public }}
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
          name: torch-canary-charts-${{ steps.history.outputs.artifact-suffix }}
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
          # named as the charts are (the publish job downloads torch-canary-record-*)
          name: torch-canary-record-${{ steps.history.outputs.artifact-suffix }}
          path: ${{ runner.temp }}/torch-canary/record
          if-no-files-found: ignore
          overwrite: true

      - name: Fail when the candidate failed
        if: ${{ !cancelled() && steps.tuc.outcome != 'success' && steps.history.outputs.no-new-build != 'true' }}
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
