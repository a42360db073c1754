"""The RL learning pilot (issue #6): fine-tune the compact baseline with `chess-sim rl --profile compact` (which
steers the chain's start, `--steer`) for a wall-time budget on this machine, then compare `best` with the
baseline on the test scenes (paired, McNemar). Prints one JSON object: the validation curve (success with Wilson
intervals vs iteration and wall time), the rise over iteration 0, the training rollouts' success over the first
and last 10 iterations, the test comparison, the rollout time split and decisions/s. The learning curve (success
vs iteration and vs wall time) is also written as a PNG (`--figure`, for docs/experiments.md).

    .venv/bin/python benchmarks/rl_pilot.py [--policy models/baseline] [--out runs/rl_pilot] [--minutes 120]
        [--test-episodes 200] [--figure docs/rl_pilot.png] [--resume]

Targets: validation success +15 points over iteration 0 within 2 hours; `best` beats the baseline on the test
scenes in the paired comparison.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

from chess_sim.report.compare import compare  # noqa: E402
from chess_sim.config import RL_PROFILES, EvalConfig, profile  # noqa: E402
from chess_sim.eval import evaluate  # noqa: E402
from chess_sim.rl.train import run  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--policy", type=Path, default=Path("models/baseline"))
    parser.add_argument("--out", type=Path, default=Path("runs/rl_pilot"))
    parser.add_argument("--minutes", type=float, default=120.0)
    parser.add_argument("--test-episodes", type=int, default=200)
    parser.add_argument("--figure", type=Path, default=Path("docs/rl_pilot.png"))
    parser.add_argument("--resume", action="store_true")
    args = parser.parse_args()
    compact = RL_PROFILES["compact"]
    cfg = replace(compact, run=replace(compact.run, iterations=10_000, minutes=args.minutes))
    env = profile("baseline")
    run(args.policy, args.out / "rl", cfg, env, resume=args.resume, profile_name="compact")
    log = [json.loads(line) for line in (args.out / "rl" / "log.jsonl").read_text().splitlines()]
    args.figure.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(args.out / "rl" / "curves.png", args.figure)  # the run draws it at its final validation
    curve = [{"iteration": line["iteration"], "elapsed_min": line["elapsed_s"] / 60,
              "val_success": line["val_success"], "val_success_ci": line["val_success_ci"]}
             for line in log if "val_success" in line]
    test = EvalConfig(episodes=args.test_episodes, envs=cfg.run.envs)
    for name, policy in (("baseline", args.policy), ("best", args.out / "rl" / "best")):
        out = args.out / f"test_{name}"
        evaluate(policy, out, test, env, resume=(out / "eval_args.json").is_file())
    paired = compare(args.out / "test_baseline", args.out / "test_best")
    updates = [line for line in log if line["iteration"] > 0]
    rollout = sum(line["rollout_s"] for line in updates)
    parts = {key: sum(line["rollout_parts"][key] for line in updates) for key in ("prep", "sample", "env", "reset")}
    print(json.dumps({
        "iterations": len(updates), "minutes": log[-1]["elapsed_s"] / 60, "curve": curve,
        "val_rise_points": 100 * (max(c["val_success"] for c in curve) - curve[0]["val_success"]),
        "target_rise_points": 15,
        "test": {key: paired[key] for key in ("episodes", "success_a", "success_a_ci", "success_b", "success_b_ci",
                                                "difference", "only_a", "only_b", "mcnemar_p")},
        "train_success_first_last": _first_last(updates),
        "rollout_split_s": parts, "rollout_s": rollout, "update_s": sum(line["update_s"] for line in updates),
        "decisions_per_s": sum(line["decisions"] for line in updates) / rollout if rollout else None,
    }))


def _first_last(updates: list[dict], window: int = 10) -> dict:
    """Success of the training rollouts (fresh scenes, the sampling policy) over the first and the last `window`
    iterations: the learning signal on scenes that are never repeated, with no fixed draws to be lucky on."""
    def rate(lines):
        episodes = sum(line["train_episodes"] for line in lines)
        return sum(line["train_success"] * line["train_episodes"] for line in lines) / episodes if episodes else None

    return {"window": window, "first": rate(updates[:window]), "last": rate(updates[-window:])}


if __name__ == "__main__":
    main()
