#!/usr/bin/env bash
# DAgger rounds (issue #20): for round r = 1..ROUNDS
#   1. record   the round's policy (POLICY for round 1, then the previous round's best) drives SCENES training
#               scenes of seed 7700003 + 1000 r and the expert's takeovers from its states are recorded;
#   2. train    on the demonstrations and every round's takeovers so far, from the previous policy's weights
#               (FROM=init) or from scratch (FROM=scratch);
#   3. evaluate the round's best checkpoint on VAL_EPISODES held-out scenes of seed 9300004 (training picks `best`
#      on the validation seed 9300003, so its own readings are biased upwards).
# Compact policies only (the `train` recipe here builds and fine-tunes compact policies).
# Every step resumes where an interrupted run stopped and a finished step is skipped, so running the same command
# again continues the loop (a round takes longer than one sitting).
#   scripts/dagger_rounds.sh DEMOS POLICY OUT [ROUNDS]
# Sizes (environment): SCENES (100), BRANCH_EVERY (2), BRANCH_STEPS (100), START_SPREAD (1.0), STEPS (16000),
# VAL_EPISODES (20), FROM (init), WORKERS (2); training's LR and WARMUP_STEPS (train's defaults when unset: a round
# that starts from the previous weights may want a lower peak).
set -euo pipefail
if (($# < 3)); then
    echo "usage: scripts/dagger_rounds.sh DEMOS POLICY OUT [ROUNDS]" >&2
    exit 2
fi
demos=$(realpath -m "$1"); policy=$(realpath -m "$2"); out=$(realpath -m "$3"); rounds=${4:-3}
cd "$(dirname "$0")/.."
case "${FROM:-init}" in init|scratch) ;; *) echo "error: FROM must be init or scratch, got '$FROM'" >&2; exit 2;; esac
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "error: ROUNDS must be a positive integer, got '$rounds'" >&2; exit 2; }
[[ -f "$demos/meta/info.json" ]] || { echo "error: $demos is not a LeRobot dataset" >&2; exit 2; }
grep -q '"kind": "compact"' "$policy/config.json" 2>/dev/null ||
    { echo "error: $policy is not a compact policy directory (the rounds train compact policies)" >&2; exit 2; }
export MUJOCO_GL=${MUJOCO_GL:-egl}
cs=.venv/bin/chess-sim
datasets=("$demos")
previous=$policy
for ((r = 1; r <= rounds; r++)); do
    round=$out/round_$r
    mkdir -p "$round"
    data=$round/data
    resume=(); [[ -f "$data/meta/chess_sim_commit/progress.json" ]] && resume=(--resume)
    $cs record --policy "$previous" --episodes "${SCENES:-100}" --seed $((7700003 + 1000 * r)) --out "$data" \
        --round "$r" --branch-every "${BRANCH_EVERY:-2}" --branch-steps "${BRANCH_STEPS:-100}" \
        --start-spread "${START_SPREAD:-1.0}" --workers "${WORKERS:-2}" --json "$round/record.json" "${resume[@]}"
    datasets+=("$data")

    train=(--out "$round/train" --steps "${STEPS:-16000}" --val-episodes "${VAL_EPISODES:-20}")
    [[ -n "${LR:-}" ]] && train+=(--lr "$LR")
    [[ -n "${WARMUP_STEPS:-}" ]] && train+=(--warmup-steps "$WARMUP_STEPS")
    if [[ -f "$round/train/train_args.json" ]]; then
        train+=(--resume)
    elif [[ "${FROM:-init}" == init ]]; then
        train+=(--init "$previous")
    fi
    $cs train --dataset "${datasets[@]}" "${train[@]}" --json "$round/train.json"

    if [[ ! -f "$round/val/summary.json" ]]; then
        resume=(); [[ -f "$round/val/eval_args.json" ]] && resume=(--resume)
        $cs eval --policy "$round/train/best" --seed 9300004 --episodes "${VAL_EPISODES:-20}" --out "$round/val" \
            "${resume[@]}"
    fi
    previous=$round/train/best
done
.venv/bin/python - "$out" "$rounds" <<'PY'
import json, sys
from pathlib import Path

out, rounds = Path(sys.argv[1]), int(sys.argv[2])
print("round  takeovers kept  driving policy's success  held-out success of the round's policy")
for r in range(1, rounds + 1):
    record = json.loads((out / f"round_{r}" / "record.json").read_text())
    val = json.loads((out / f"round_{r}" / "val" / "summary.json").read_text())
    print(f"{r:5d}  {record['episodes_saved']:14d}  {record.get('policy_success', float('nan')):24.1%}  "
          f"{val['success']:.1%} of {val['episodes']}")
PY
