#!/usr/bin/env bash
# Install what the tests need into .venv (the tool, its test extras, torch 2.13.0) and run every test.
# With no arguments: every test, in two phases. First all but the `serial` ones, spread over one pytest
# process per CPU (pytest-xdist); then the `serial` ones alone: their verdicts are timings (A/B latency,
# compile time) and must not share the machine with other tests. Extra arguments go to one plain pytest
# instead, e.g. scripts/test.sh -m fast, or scripts/test.sh -n auto -m "not slow".
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]' 'torch==2.13.0'
# headless Chromium renders `history --html`'s page in tests/test_history_page.py (which skips, saying why, without it)
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } >/dev/null 2>&1 ||
    echo "scripts/test.sh: could not install chromium (apt-get); tests/test_history_page.py will skip" >&2
fi

pytest_phase() {  # pytest's exit code, with "collected nothing" (5) made a failure
  local rc=0
  .venv/bin/python -m pytest "$@" || rc=$?
  if [ "$rc" -eq 5 ]; then
    echo "scripts/test.sh: pytest collected no tests for: $*; that is a failure here" >&2
    rc=1
  fi
  return "$rc"
}

if [ "$#" -gt 0 ]; then
  rc=0
  pytest_phase "$@" || rc=$?
  exit "$rc"
fi
started=$(date +%s)
parallel_rc=0
pytest_phase -n auto --dist loadgroup -m "not serial" --durations=40 || parallel_rc=$?
serial_rc=0
pytest_phase -m serial --durations=40 || serial_rc=$?
echo "scripts/test.sh: parallel phase exit ${parallel_rc}, serial phase exit ${serial_rc}, $(( $(date +%s) - started )) s in all"
if [ "$parallel_rc" -ne 0 ]; then exit "$parallel_rc"; fi
exit "$serial_rc"
