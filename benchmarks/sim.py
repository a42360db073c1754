"""Simulator speed: env overhead over raw physics, observation rendering, worker scaling. One JSON line.

    .venv/bin/python benchmarks/sim.py [--repeats 20] [--episodes 8]

Targets (issue #2): chunk stepping <= 1.15x raw mj_step for the same physics; >= 30 rendered frames/s per
core (2 cameras at the default resolution); 2 workers >= 1.8x the expert-episode throughput of 1.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import time
from dataclasses import replace

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np  # noqa: E402

from chess_sim.config import TEST_SEED, profile  # noqa: E402
from chess_sim.sim.env import ChessEnv  # noqa: E402
from chess_sim.sim.expert import ExpertDriver  # noqa: E402
from chess_sim.sim.episodes import init_worker, worker_episode  # noqa: E402


def chunk_overhead(repeats: int) -> dict:
    """Median time of `step_chunk` (50 steps, no rendering) against the same 50 x substeps raw mj_step calls
    from the same state with the same targets, interleaved so both see the same machine load."""
    env = ChessEnv(replace(profile("baseline"), render=False))
    env_times, raw_times = [], []
    for repeat in range(repeats):
        env.reset(seed=TEST_SEED, options={"index": repeat})
        expert = ExpertDriver(env)
        chunk = np.array([expert.action() for _ in range(50)])
        raw_times.append(env.time_physics(chunk))
        start = time.perf_counter()
        env.step_chunk(chunk)
        env_times.append(time.perf_counter() - start)
    ratios = [e / r for e, r in zip(env_times, raw_times)]
    return {"chunk_ms_env_median": 1000 * statistics.median(env_times),
            "chunk_ms_raw_median": 1000 * statistics.median(raw_times),
            "overhead_ratio_median": statistics.median(ratios), "overhead_target": 1.15,
            "mj_steps_per_s": env.substeps * 50 / statistics.median(raw_times)}


def render_rate(frames: int) -> dict:
    env = ChessEnv(profile("baseline"))
    env.reset(seed=TEST_SEED, options={"index": 0})
    env.camera_images()  # renderer creation is a one-off
    start = time.perf_counter()
    for _ in range(frames):
        env.camera_images()
    seconds = time.perf_counter() - start
    env.close()
    size = env.cfg.camera
    return {"render_resolution": [size.width, size.height], "observations_per_s": frames / seconds,
            "camera_frames_per_s": 2 * frames / seconds, "camera_frames_target": 30}


def worker_scaling(episodes: int) -> dict:
    """Steady-state expert-episode throughput of 1 and 2 warm worker processes (process start-up and scene
    compilation excluded: one warm-up episode per worker first)."""
    cfg = replace(profile("baseline"), render=False)
    times = {}
    for workers in (1, 2):
        with mp.get_context("spawn").Pool(workers, initializer=init_worker, initargs=(cfg,)) as pool:
            pool.map(worker_episode, [(TEST_SEED, 10_000 + i, None) for i in range(workers)], chunksize=1)
            start = time.perf_counter()
            list(pool.imap(worker_episode, [(TEST_SEED, i, None) for i in range(episodes)], chunksize=1))
            times[workers] = time.perf_counter() - start
    return {"episodes": episodes, "seconds_1_worker": times[1], "seconds_2_workers": times[2],
            "speedup_2_workers": times[1] / times[2], "speedup_target": 1.8}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--frames", type=int, default=200)
    parser.add_argument("--episodes", type=int, default=24)
    args = parser.parse_args()
    report = {"cpus": os.cpu_count()}
    report.update(chunk_overhead(args.repeats))
    report.update(render_rate(args.frames))
    report.update(worker_scaling(args.episodes))
    print(json.dumps(report))


if __name__ == "__main__":
    main()
