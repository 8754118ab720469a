#!/usr/bin/env bash
# One-command smoke test on a machine whose Python already has torch (a CUDA GPU box, a Mac):
# the built-in suite on the device, then an A/A `compare` of that torch with itself (latency, memory
# and cross-version), everything under one folder:
#   OUT/run/      report.json, junit.xml, summary.md, logs/    (torch-upgrade-check run)
#   OUT/compare/  the same for the A/A compare
#   OUT/summary.md  both summaries;  OUT/smoke.log  everything printed
#
#   scripts/gpu-smoke.sh [--device cuda|mps|cpu|auto] [--out DIR] [--python PY] [-- flags for both commands]
# Flags after `--` (say `--only 'mlp*'`) go to both commands and replace compare's default selection.
#
# It installs nothing: the tool runs from this checkout's src/ with the interpreter's own torch and PyYAML
# (GPU machines often have no network); when one is missing it says which and how to get it, and exits 3.
# junitparser is optional: without it the junit.xml files are skipped, saying so. Each command rewrites its
# report.json after every check and prints one line per check; a final table of every check follows, also
# when the smoke is stopped (Ctrl-C, a timeout): what finished is on disk and in the table.
# Exit: 0 when both commands ran (whatever their verdicts: read the summaries), 3 when either could not
# run (the log says why).
#
# Budget: under 8 minutes on one GPU with cold Inductor caches. Left out to get there: the opt-in
# `compile-time` aspect (every sample a cold compile: minutes a workload) and, in the A/A compare, every
# correctness aspect (`run` covers them on the same torch); `fsdp2` needs two GPUs and is skipped on one.
# Works under macOS's bash 3.2 (no empty-array expansion under `set -u`, no bash 4 features).
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
device=cuda
out=gpu-smoke
python=python3
extra=()
nextra=0  # bash 3.2: no "${extra[@]}" of an empty array under set -u, so its length is kept apart
while [ $# -gt 0 ]; do
  case "$1" in
    --device) device="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --python) python="$2"; shift 2 ;;
    --) shift; nextra=$#; extra=("$@"); break ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "gpu-smoke: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
case "$device" in cuda|mps|cpu|auto) ;; *) echo "gpu-smoke: --device must be cuda, mps, cpu or auto, got '$device'" >&2; exit 2 ;; esac
if ! command -v "$python" >/dev/null 2>&1; then
  echo "gpu-smoke: interpreter '$python' not found; pass --python PATH of a Python that has torch" >&2
  exit 3
fi
missing=$("$python" - <<'EOF'
import importlib.util
need = {"torch": "torch (the one to test)", "yaml": "PyYAML (pip install pyyaml)"}
print("; ".join(why for mod, why in need.items() if importlib.util.find_spec(mod) is None))
EOF
)
if [ -n "$missing" ]; then
  echo "gpu-smoke: $python lacks: $missing. With no network, copy the wheels over and pip install --no-deps them." >&2
  exit 3
fi
mkdir -p "$out"
out="$(cd "$out" && pwd)"
log="$out/smoke.log"
: >"$log"
export PYTHONPATH="$root/src${PYTHONPATH:+:$PYTHONPATH}"
say() { echo "gpu-smoke: $*" | tee -a "$log"; }
if ! "$python" -c 'import junitparser' >/dev/null 2>&1; then
  say "junitparser is not installed: the junit.xml files are skipped (report.json and summary.md have every result)"
fi

# Both commands' results, one row per check, from whatever report.json files exist (also after a stop).
table() {
  "$python" - "$out" <<'EOF' | tee -a "$log"
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
rows, runs = {}, []
for part in ("run", "compare"):
    path = out / part / "report.json"
    if not path.is_file():
        continue
    doc = json.loads(path.read_text())
    reports = doc.get("reports", [doc])
    report = next((r for r in reports if r.get("role") == "candidate"), reports[-1])
    runs.append(f"{part}: {report.get('device')}, torch {report.get('label')}"
                + ("" if report.get("complete") else " (stopped before the end)"))
    for r in report.get("results", []):
        rows.setdefault(r["id"], {})[part] = r["outcome"]
if not rows:
    print("gpu-smoke: no check finished")
    sys.exit(0)
width = max(len(i) for i in rows)
print(f"{'check':<{width}}  {'run':<10} compare (A/A)")
for check, seen in rows.items():
    print(f"{check:<{width}}  {seen.get('run', '-'):<10} {seen.get('compare', '-')}")
counts = {}
for seen in rows.values():
    for outcome in seen.values():
        counts[outcome] = counts.get(outcome, 0) + 1
print("; ".join(runs) + " -- " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())))
EOF
}

summaries() {
  {
    echo "# gpu-smoke on $device"
    for part in run compare; do
      if [ -f "$out/$part/summary.md" ]; then echo; cat "$out/$part/summary.md"; fi
    done
  } >"$out/summary.md"
}

finished=0
child=0
on_exit() {
  if [ "$finished" -eq 0 ]; then
    say "stopped before the end; what finished is below and in $out/*/report.json"
  fi
  table
  summaries
}
stop() {  # a stop (Ctrl-C, a timeout's TERM) ends the running command too, then the EXIT trap reports
  if [ "$child" -ne 0 ]; then
    kill -TERM "$child" 2>/dev/null
    wait "$child" 2>/dev/null
  fi
  exit "$1"
}
trap on_exit EXIT
trap 'stop 130' INT
trap 'stop 143' TERM

# Run a command in the background (so a trapped signal is handled at once, not after it ends), its output
# on the terminal and in the log; return its exit status.
step() {
  "$@" > >(tee -a "$log") 2>&1 &
  child=$!
  wait "$child"
  local rc=$?
  child=0
  return "$rc"
}

say "$("$python" -c 'import sys, torch; print(f"python {sys.version.split()[0]}, torch {torch.__version__}, cuda {torch.version.cuda}, gpus {torch.cuda.device_count()}")')"
started=$SECONDS
# ${extra[@]+"${extra[@]}"}: bash 3.2 treats "${extra[@]}" of an empty array as unbound under set -u
step "$python" -m torch_upgrade_check run --python "$python" --device "$device" --out "$out/run" --fail-on none \
  --no-job-summary ${extra[@]+"${extra[@]}"}
run_rc=$?
say "run exited $run_rc after $((SECONDS - started)) s"
started=$SECONDS
selection=(--only latency --only memory --only cross-version)  # run covered the rest; extra flags replace this
if [ "$nextra" -gt 0 ]; then selection=(${extra[@]+"${extra[@]}"}); fi
step "$python" -m torch_upgrade_check compare --baseline-python "$python" --candidate-python "$python" \
  --device "$device" --out "$out/compare" --fail-on none --no-job-summary ${selection[@]+"${selection[@]}"}
compare_rc=$?
say "compare (A/A) exited $compare_rc after $((SECONDS - started)) s"
finished=1
say "results in $out (summary.md, run/, compare/, smoke.log)"
if [ "$run_rc" -le 1 ] && [ "$compare_rc" -le 1 ]; then exit 0; fi
exit 3
