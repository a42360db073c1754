"""How much does the chain's start x_0 decide an episode, and what does a narrower start do? (issue #6, `rl --steer`)

The policy runs on `--scenes` training scenes (far beyond any run's indices), each with `--draws` independent
x_0 draws, with start spreads `--spreads` (x_0 ~ N(0, s^2 I); 1 is the policy as trained, 0.05, the smallest a
steered start may have, is all but its mode) and a
faint chain noise (1e-4, so the chain is all but the noise-free ODE). Per spread: success over all episodes and
the histogram of successes per scene. If the scene alone decided, every scene would score 0 or `draws`; a
histogram shaped like Binomial(draws, p) means the draw decides.

    .venv/bin/python benchmarks/start_spread.py [--policy models/baseline-bc] [--scenes 40] [--draws 4]
        [--spreads 1 0.5 0.05]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

import torch  # noqa: E402

from chess_sim.config import RL_PROFILES, START_SPREAD_BOUNDS, NoiseConfig, StartConfig, profile  # noqa: E402
from chess_sim.rl.train import build, collect, training_env  # noqa: E402
from chess_sim.sim.vec_env import make_vec_env  # noqa: E402

FIRST_UNUSED_TRAIN_INDEX = 800_000
"""Training-scene indices far beyond any run's, so these scenes are not a pilot's."""
FAINT = 1e-4
"""Chain noise: the smallest noise size FlowRL allows."""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--policy", type=Path, default=Path("models/baseline-bc"))
    parser.add_argument("--scenes", type=int, default=40)
    parser.add_argument("--draws", type=int, default=4)
    parser.add_argument("--spreads", type=float, nargs="+", default=[1.0, 0.5, 0.05])
    args = parser.parse_args()
    low, high = START_SPREAD_BOUNDS
    if not all(low <= spread <= high for spread in args.spreads) or args.scenes < 1 or args.draws < 1:
        parser.error(f"--spreads must lie in [{low}, {high}]; --scenes and --draws must be >= 1")
    compact = RL_PROFILES["compact"]
    cfg = replace(compact, algorithm="ppo", run=replace(compact.run, episodes=args.scenes, chain_dtype="float32"),
                  ppo=replace(compact.ppo, likelihood="chain"), noise=NoiseConfig(sigma_start=FAINT, sigma_end=FAINT),
                  start=StartConfig(steer=True))
    torch.set_num_threads(1)
    model, _ = build(args.policy, cfg)
    results = []
    with make_vec_env(cfg.run.envs, training_env(model, profile("baseline"))) as vec:
        for spread in args.spreads:
            with torch.no_grad():
                model.start.log_std.fill_(math.log(spread))
            began, solved = time.perf_counter(), torch.zeros(args.scenes, dtype=torch.long)
            for draw in range(args.draws):
                _, rows, _ = collect(model, vec, cfg, FIRST_UNUSED_TRAIN_INDEX, torch.Generator().manual_seed(draw))
                for row in rows:
                    solved[row["index"] - FIRST_UNUSED_TRAIN_INDEX] += row["end"] == "success"
            histogram = torch.bincount(solved, minlength=args.draws + 1).tolist()
            results.append({"spread": spread, "success": float(solved.sum()) / (args.scenes * args.draws),
                            "scenes_by_successes": histogram, "seconds": time.perf_counter() - began})
    print(json.dumps({"policy": str(args.policy), "scenes": args.scenes, "draws": args.draws, "results": results}))


if __name__ == "__main__":
    main()
