"""Evaluation speed: episodes/hour of a policy with 1 and 2 simulators, and where the time goes (policy in
this process; physics and rendering summed over the workers). Target (issue #5): a 200-episode evaluation of
the baseline in under 15 minutes on this 2-core machine. Prints one JSON object.

    .venv/bin/python benchmarks/eval.py [--policy models/baseline] [--episodes 20] [--envs 1 2] [--keep DIR]

`--keep DIR` keeps each evaluation in DIR/envs_W (an ordinary evaluation directory) instead of discarding it.

Minutes for 200 episodes are extrapolated from each run's episodes/hour (stated as such) unless
--episodes 200 is given.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

from chess_sim.config import EvalConfig, profile  # noqa: E402
from chess_sim.eval import evaluate  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--policy", default="models/baseline")
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--envs", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--keep", type=Path, help="keep the evaluations in KEEP/envs_W")
    args = parser.parse_args()
    runs = {}
    for envs in args.envs:
        with tempfile.TemporaryDirectory() as tmp:
            out = (args.keep or Path(tmp)) / f"envs_{envs}"
            summary, rows, timing = evaluate(args.policy, out, EvalConfig(episodes=args.episodes, envs=envs),
                                             profile("baseline"))
        per_hour = args.episodes / timing.total_s * 3600
        runs[str(envs)] = {
            "seconds": timing.total_s, "episodes_per_hour": per_hour, "minutes_for_200": 200 / per_hour * 60,
            "policy_s": timing.policy_s, "waiting_for_simulators_s": timing.simulate_s,
            "worker_physics_s": timing.physics_s, "worker_render_s": timing.render_s,
            "decisions": sum(row["decisions"] for row in rows), "success": summary["success"],
        }
    print(json.dumps({"policy": args.policy, "episodes": args.episodes, "envs": runs,
                      "extrapolated": args.episodes != 200, "target_minutes_for_200": 15}))


if __name__ == "__main__":
    main()
