#!/usr/bin/env bash
# The main job on the built-in default: a short RL fine-tuning of models/baseline (MINUTES of training, 5 by
# default, with a progress bar), its report, and the paired comparison of its best checkpoint against the
# baseline on the same test scenes. `best` is the checkpoint with the best validation success; when no later
# validation matches iteration 0's, it is the baseline itself and the comparison shows no change.
#   scripts/main_job.sh [OUT]        (default OUT: runs/main in the repository; it must not exist yet)
# Sizes (environment): MINUTES (5), RL_EPISODES per iteration (the compact profile's 64), VAL_EPISODES (20),
# TEST_EPISODES (50).
set -euo pipefail
out=$(realpath -m "${1:-$(dirname "$0")/../runs/main}")
cd "$(dirname "$0")/.."
minutes=${MINUTES:-5}
episodes=${TEST_EPISODES:-50}
rl_sizes=(--val-episodes "${VAL_EPISODES:-20}")
if [[ -n "${RL_EPISODES:-}" ]]; then rl_sizes+=(--episodes "$RL_EPISODES"); fi
if ! awk -v m="$minutes" 'BEGIN { exit !(m + 0 > 0) }'; then
    echo "error: MINUTES must be a positive number of minutes, got '$minutes'" >&2
    exit 2
fi
if [[ -e "$out" ]]; then
    echo "error: $out already exists; pass another output directory (scripts/main_job.sh OUT)" >&2
    exit 2
fi
export MUJOCO_GL=${MUJOCO_GL:-egl}
cs=.venv/bin/chess-sim
# The time budget ends the run: the iteration cap is only a backstop.
$cs rl --policy models/baseline --out "$out/rl" --minutes "$minutes" --iterations 100000 "${rl_sizes[@]}"
.venv/bin/python - "$out/rl/log.jsonl" <<'PY'
import sys
from chess_sim import jsonl
from chess_sim.report import page as report
validations = [line for line in jsonl.read(sys.argv[1]) if "val_success" in line]
best = report.best_validation(validations, "iteration")
print(f"best = iteration {best['iteration']}: validation success {best['val_success']:.0%} "
      f"(iteration 0, the baseline: {validations[0]['val_success']:.0%})")
PY
$cs eval --policy models/baseline --episodes "$episodes" --video 2 --out "$out/test_baseline"
$cs eval --policy "$out/rl/best" --episodes "$episodes" --video 2 --out "$out/test_best"
$cs eval --compare "$out/test_baseline" "$out/test_best" --json "$out/comparison.json"
echo "report: $out/rl/report.html   comparison: $out/comparison.json"
