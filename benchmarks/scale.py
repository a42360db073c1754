"""Scale-out: the Ray backend's overhead and a rollout time model. Prints one JSON object.

1. Decisions/s of 2 simulators (both cameras rendered, 50-step chunks) with the local backend (worker processes)
   and the Ray backend (actors on a local Ray instance); target (issue #7): Ray's time <= 1.25x the local one.
   Each backend runs `--trials` timed trials of `--rounds` rounds; medians are compared.
2. The time model: a decision costs a simulator `t_sim` seconds (measured above, per chunk) and the learner
   `t_policy(B) = a + b * B` seconds for a batch of B decisions (fitted to measured batches of the policy on
   `--device`). With the simulators split in two halves that alternate (one half steps while the learner
   decides for the other), the learner is busy all the time once t_policy(N / 2) >= t_sim, i.e. from
   N* = 2 * (t_sim - a) / b simulators; fewer leave it idle, more make simulators wait. Assumptions: one CPU per
   simulator, observations moved in negligible time, the learner's batch time measured here stands for the
   learner's hardware (run with `--device cuda` on the GPU machine for a GPU learner).

    .venv/bin/python benchmarks/scale.py [--rounds 10] [--trials 3] [--policy DIR] [--device cpu]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np  # noqa: E402

from chess_sim.config import TRAIN_SEED, profile  # noqa: E402
from chess_sim.sim.backends import make_vec_env  # noqa: E402

SIMULATORS = 2
BATCHES = (1, 2, 4, 8, 16, 32)


def backend_seconds(backend: str, rounds: int, trials: int) -> list[float]:
    """Seconds per round (both simulators step one chunk) for each trial."""
    cfg = profile("baseline")
    out = []
    with make_vec_env(SIMULATORS, cfg, backend=backend) as vec:
        for trial in range(trials):
            observations = vec.reset_many({worker: (TRAIN_SEED, 100 * trial + worker) for worker in range(SIMULATORS)})
            holds = {worker: np.tile(observations[worker][0]["agent_pos"], (50, 1)) for worker in range(SIMULATORS)}
            vec.step_many(holds)  # warm-up round: first renders and first object-store transfers
            began = time.perf_counter()
            for _ in range(rounds):
                vec.step_many(holds)
            out.append((time.perf_counter() - began) / rounds)
    return out


def policy_seconds(policy_dir: str | None, device: str) -> dict[int, float]:
    """Median seconds of one noise-free decision batch (encode + K velocity calls) per batch size."""
    import torch

    from chess_sim.policy.base import sample_chunk
    from chess_sim.policy.compact import CompactPolicy
    from chess_sim.policy.loading import load_policy

    policy = (load_policy(policy_dir) if policy_dir else CompactPolicy()).to(device).eval()
    out = {}
    for batch_size in BATCHES:
        batch = {"observation.images.front": torch.rand(batch_size, 3, 256, 256, device=device),
                 "observation.images.wrist": torch.rand(batch_size, 3, 256, 256, device=device),
                 "observation.state": torch.zeros(batch_size, 6, device=device),
                 "task": ["Move the white pawn from e2 to e4."] * batch_size}
        times = []
        with torch.no_grad():
            for _ in range(4):
                began = time.perf_counter()
                x0 = torch.randn(batch_size, policy.chunk, policy.chain_dim, device=device)
                sample_chunk(policy, policy.encode(batch), x0)
                if device.startswith("cuda"):
                    torch.cuda.synchronize()
                times.append(time.perf_counter() - began)
        out[batch_size] = statistics.median(times[1:])
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--policy", help="policy directory (default: an untrained compact policy)")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    local = backend_seconds("local", args.rounds, args.trials)
    ray_ = backend_seconds("ray", args.rounds, args.trials)
    t_local, t_ray = statistics.median(local), statistics.median(ray_)
    batches = policy_seconds(args.policy, args.device)
    slope, intercept = np.polyfit(list(batches), list(batches.values()), 1)
    t_sim = t_local  # one chunk per simulator per round, the simulators in parallel on their own cores
    busy_from = 2 * (t_sim - intercept) / slope if slope > 0 else None
    print(json.dumps({
        "simulators": SIMULATORS, "rounds": args.rounds, "trials": args.trials,
        "local_round_s": local, "ray_round_s": ray_,
        "local_decisions_per_s": SIMULATORS / t_local, "ray_decisions_per_s": SIMULATORS / t_ray,
        "ray_over_local_time": t_ray / t_local, "target_ray_over_local_time": 1.25,
        "model": {"t_sim_s": t_sim, "policy_batch_s": {str(k): v for k, v in batches.items()},
                  "policy_fit_a_s": intercept, "policy_fit_b_s_per_decision": slope, "device": args.device,
                  "simulators_to_keep_learner_busy": busy_from},
    }))


if __name__ == "__main__":
    main()
