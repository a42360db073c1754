#!/usr/bin/env bash
# The main job on the built-in default: a short RL fine-tuning of models/baseline with the RL profile `main`
# (success-filtered flow matching of the velocity network, anchored to the baseline; the baseline samples at its
# hand-set start spread 0.5, and so do the run's validations and saved policies), its report, and a paired
# comparison of the run's last policy with the baseline on the same test scenes and draws.
#   scripts/main_job.sh [OUT]        (default OUT: runs/main in the repository; it must not exist yet)
# The profile sizes the run (src/chess_sim/config/rl.py); these variables, when set, override it: ITERATIONS,
# RL_EPISODES per iteration, MINUTES (the guard against a much slower machine: the run stops after the first
# iteration that ends past it), VAL_EPISODES. TEST_EPISODES: test scenes of the comparison (100).
set -euo pipefail
out=$(realpath -m "${1:-$(dirname "$0")/../runs/main}")
cd "$(dirname "$0")/.."
episodes=${TEST_EPISODES:-100}
sizes=()
if [[ -n "${MINUTES:-}" ]]; then
    if ! awk -v m="$MINUTES" 'BEGIN { exit !(m + 0 > 0) }'; then
        echo "error: MINUTES must be a positive number of minutes, got '$MINUTES'" >&2
        exit 2
    fi
    sizes+=(--minutes "$MINUTES")
fi
if [[ -n "${ITERATIONS:-}" ]]; then
    if ! [[ "$ITERATIONS" =~ ^[1-9][0-9]*$ ]]; then
        echo "error: ITERATIONS must be a positive whole number, got '$ITERATIONS'" >&2
        exit 2
    fi
    sizes+=(--iterations "$ITERATIONS")
fi
[[ -n "${RL_EPISODES:-}" ]] && sizes+=(--episodes "$RL_EPISODES")
[[ -n "${VAL_EPISODES:-}" ]] && sizes+=(--val-episodes "$VAL_EPISODES")
if [[ -e "$out" ]]; then
    echo "error: $out already exists; pass another output directory (scripts/main_job.sh OUT)" >&2
    exit 2
fi
export MUJOCO_GL=${MUJOCO_GL:-egl}
cs=.venv/bin/chess-sim
# A fixed number of iterations makes the job's result the same on every run (the RL is deterministic); the minutes
# only guard a much slower machine.
$cs rl --policy models/baseline --profile main --out "$out/rl" ${sizes[@]+"${sizes[@]}"}
.venv/bin/python - "$out/rl/log.jsonl" <<'PY'
import sys
from chess_sim import jsonl
validations = [line for line in jsonl.read(sys.argv[1]) if "val_success" in line]
first, last = validations[0], validations[-1]
print(f"last = iteration {last['iteration']}: validation success {last['val_success']:.0%} "
      f"(iteration 0, the baseline: {first['val_success']:.0%})")
PY
$cs eval --policy models/baseline --episodes "$episodes" --video 2 --out "$out/test_baseline"
$cs eval --policy "$out/rl/last" --episodes "$episodes" --video 2 --out "$out/test_last"
$cs eval --compare "$out/test_baseline" "$out/test_last" --json "$out/comparison.json"
echo "report: $out/rl/report.html   comparison: $out/comparison.json (the last policy vs the baseline)"
