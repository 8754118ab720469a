#!/usr/bin/env bash
# The main job end to end on this machine's CPU: install the tool and torch 2.13.0 into .venv,
# then run the whole built-in suite. Results land in torch-upgrade-check-report/.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e . 'torch==2.13.0'
exec .venv/bin/torch-upgrade-check run --device cpu "$@"
