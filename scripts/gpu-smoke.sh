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
# It installs nothing: the tool runs from this checkout's src/ with the interpreter's own torch, PyYAML
# and junitparser (GPU machines often have no network); when one is missing it says which and how to get
# it, and exits 3. Exit: 0 when both commands ran (whatever their verdicts: read the summaries),
# 3 when either could not run (the log says why). Budget: under 8 minutes on one GPU.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
device=cuda
out=gpu-smoke
python=python3
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --device) device="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --python) python="$2"; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
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
need = {"torch": "torch (the one to test)", "yaml": "PyYAML (pip install pyyaml)",
        "junitparser": "junitparser (pip install 'junitparser>=3.1')"}
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
tool=("$python" -m torch_upgrade_check)
say() { echo "gpu-smoke: $*" | tee -a "$log"; }

say "$("$python" -c 'import sys, torch; print(f"python {sys.version.split()[0]}, torch {torch.__version__}, cuda {torch.version.cuda}, gpus {torch.cuda.device_count()}")')"
started=$SECONDS
"${tool[@]}" run --python "$python" --device "$device" --out "$out/run" --fail-on none --no-job-summary \
  "${extra[@]}" 2>&1 | tee -a "$log"
run_rc=${PIPESTATUS[0]}
say "run exited $run_rc after $((SECONDS - started)) s"
started=$SECONDS
select=(--only latency --only memory --only cross-version)  # run covered the rest; extra flags replace this
[ ${#extra[@]} -gt 0 ] && select=()
"${tool[@]}" compare --baseline-python "$python" --candidate-python "$python" --device "$device" \
  --out "$out/compare" --fail-on none --no-job-summary "${select[@]}" "${extra[@]}" 2>&1 | tee -a "$log"
compare_rc=${PIPESTATUS[0]}
say "compare (A/A) exited $compare_rc after $((SECONDS - started)) s"
{
  echo "# gpu-smoke on $device"
  for part in run compare; do
    [ -f "$out/$part/summary.md" ] && { echo; cat "$out/$part/summary.md"; }
  done
} >"$out/summary.md"
say "results in $out (summary.md, run/, compare/, smoke.log)"
[ "$run_rc" -le 1 ] && [ "$compare_rc" -le 1 ] && exit 0
exit 3
