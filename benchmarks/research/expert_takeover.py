"""Does the expert label a state the way its own demonstrations do? (DAgger's premise, issue #20.)

The expert runs its own episodes on training scenes; every `--every` steps a fresh expert (which did not plan the
episode) takes over on a copy of the state, and its next `--horizon` commands are compared with the commands of the
expert that planned the episode. Reported per phase of the planning expert (pick, place, retreat): the largest
arm-joint gap over the horizon (degrees; median, 90th percentile, share above 10), the share of takeovers whose
gripper command ever differs by more than half its stroke, and the share in which the fresh expert gives up.
A gap is a DAgger label that contradicts the demonstrations at the same state. Prints one JSON object.

    .venv/bin/python benchmarks/expert_takeover.py [--scenes 12] [--every 10] [--horizon 50] [--seed 7700003]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import defaultdict
from dataclasses import replace

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np  # noqa: E402

from chess_sim.config import TRAIN_SEED, profile  # noqa: E402
from chess_sim.sim.env import ChessEnv  # noqa: E402
from chess_sim.sim.expert import ExpertDriver  # noqa: E402

GRIPPER_HALF_STROKE = 5.0
"""Gripper units (0 closed .. 100 open; the expert's open command is ~10.7): a gap above this is opening against
closing."""


def scene_gaps(env: ChessEnv, seed: int, index: int, every: int, horizon: int) -> list[dict]:
    """One scene: the planning expert's commands, then a fresh expert's from every `every`-th state."""
    planner, fresh = ExpertDriver(env), ExpertDriver(env)
    env.reset(seed=seed, options={"index": index})
    states, commands, phases = [], [], []
    while True:
        states.append(env.save_state())
        commands.append(planner.action())
        phases.append(planner.expert.phase)
        _, terminated, truncated, _ = env.advance(commands[-1])
        if terminated or truncated:
            break
    commands = np.array(commands)
    gaps = []
    for t in range(every, len(commands) - horizon, every):
        env.restore_state(states[t])
        with fresh.on_a_copy():
            taking_over = [fresh.action()]
            for _ in range(horizon - 1):
                env.advance(taking_over[-1])
                taking_over.append(fresh.action())
            gave_up = fresh.expert.gave_up is not None
        gap = np.abs(np.array(taking_over) - commands[t:t + horizon])
        gaps.append({"phase": phases[t], "arm_deg": float(gap[:, :5].max()),
                     "gripper_flip": bool(gap[:, 5].max() > GRIPPER_HALF_STROKE), "gave_up": gave_up})
    return gaps


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenes", type=int, default=12)
    parser.add_argument("--every", type=int, default=10, help="control steps between takeovers")
    parser.add_argument("--horizon", type=int, default=50, help="commands compared per takeover (one chunk)")
    parser.add_argument("--seed", type=int, default=TRAIN_SEED)
    args = parser.parse_args()
    if min(args.scenes, args.every, args.horizon) < 1:
        parser.error("--scenes, --every and --horizon must be >= 1")
    env = ChessEnv(replace(profile("baseline"), render=False))
    began = time.perf_counter()
    by_phase = defaultdict(list)
    for index in range(args.scenes):
        for gap in scene_gaps(env, args.seed, index, args.every, args.horizon):
            by_phase[gap["phase"]].append(gap)
    report = {"scenes": args.scenes, "seed": args.seed, "every": args.every, "horizon": args.horizon}
    for phase, gaps in sorted(by_phase.items()):
        arm = np.array([gap["arm_deg"] for gap in gaps])
        report[phase] = {"takeovers": len(gaps), "arm_gap_deg_median": round(float(np.median(arm)), 2),
                         "arm_gap_deg_p90": round(float(np.percentile(arm, 90)), 2),
                         "share_arm_gap_over_10_deg": round(float((arm > 10).mean()), 3),
                         "share_gripper_flipped": round(float(np.mean([gap["gripper_flip"] for gap in gaps])), 3),
                         "share_gave_up": round(float(np.mean([gap["gave_up"] for gap in gaps])), 3)}
    report["seconds"] = round(time.perf_counter() - began, 1)
    env.close()
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
