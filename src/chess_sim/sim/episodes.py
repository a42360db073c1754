"""Scripted-expert episodes, one by one or spread over worker processes (one simulator each): the one loop that
`chess-sim expert` and the demonstration recorder (`data/record.py`) share."""

from __future__ import annotations

import itertools
import multiprocessing as mp
import os
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np

from chess_sim.config import EnvConfig
from chess_sim.progress import Progress
from chess_sim.sim.env import ChessEnv
from chess_sim.sim.expert import ExpertDriver
from chess_sim.sim.judge import episode_row

_WORKER: tuple[ChessEnv, ExpertDriver] | None = None


def expert_episode(env: ChessEnv, expert: ExpertDriver, seed: int, index: int, observe: Callable[[], None] | None = None,
                   execute: Callable[[np.ndarray], np.ndarray] | None = None) -> tuple[dict, float]:
    """Scene `(seed, index)` driven by the expert to its end: (summary row with `return` and `seconds`, seconds
    spent stepping the physics). Before each step `observe()` sees the env as the step's observation (a recorder
    reads cameras and state there), and `execute(command)` turns the expert's command into the action executed
    (default: the command itself)."""
    env.reset(seed=seed, options={"index": index})
    info, total, physics_s = expert_steps(env, expert, observe, execute)
    row = episode_row(info)
    row["return"] = total
    row["seconds"] = info["steps"] / env.cfg.physics.control_hz
    return row, physics_s


def expert_steps(env: ChessEnv, expert: ExpertDriver, observe: Callable[[], None] | None = None,
                 execute: Callable[[np.ndarray], np.ndarray] | None = None,
                 limit: int | None = None) -> tuple[dict, float, float]:
    """The expert drives from the env's current state until the episode ends, or for at most `limit` steps: (the
    last step's info, summed reward, seconds spent stepping the physics); `observe` and `execute` as in
    `expert_episode`."""
    total, physics_s, taken = 0.0, 0.0, 0
    while limit is None or taken < limit:
        if observe is not None:
            observe()
        command = expert.action()
        action = command if execute is None else execute(command)
        started = time.perf_counter()
        reward, terminated, truncated, info = env.advance(action)
        physics_s += time.perf_counter() - started
        total += reward
        taken += 1
        if terminated or truncated:
            break
    return info, total, physics_s


def filmed_expert_episode(env: ChessEnv, expert: ExpertDriver, seed: int, index: int, video: Path | None = None) -> dict:
    """`expert_episode`'s row; the episode filmed (both cameras, every step) into `video` when given."""
    if video is None:
        return expert_episode(env, expert, seed, index)[0]
    from chess_sim.video import EpisodeVideo

    recorder = None

    def film() -> None:
        nonlocal recorder
        if recorder is None:
            recorder = EpisodeVideo(video, env.task.instruction, fps=env.cfg.physics.control_hz)
        recorder.add(env.camera_images(), env.steps)

    row, _ = expert_episode(env, expert, seed, index, observe=film)
    film()  # the final state
    recorder.close(row["end"])
    return row


def init_worker(cfg: EnvConfig) -> None:
    global _WORKER
    os.environ.setdefault("MUJOCO_GL", "egl")
    env = ChessEnv(cfg)
    _WORKER = env, ExpertDriver(env)


def worker_episode(job: tuple[int, int, str | None]) -> dict:
    seed, index, video = job
    return filmed_expert_episode(*_WORKER, seed, index, Path(video) if video else None)


def run_expert_episodes(cfg: EnvConfig, seed: int, episodes: int, workers: int = 1,
                        video_dir: Path | None = None, videos: int = 0, label: str = "expert") -> list[dict]:
    """Episodes `(seed, 0..episodes-1)` in index order; the first `videos` are filmed into `video_dir`."""
    cfg = replace(cfg, render=False)
    jobs = [(seed, i, str(video_dir / f"episode_{i:04d}.mp4") if video_dir and i < videos else None)
            for i in range(episodes)]
    progress = Progress(episodes, label)
    rows = []
    for row in ordered_map(worker_episode, jobs, workers, init_worker, (cfg,)):
        rows.append(row)
        progress.advance(note=f"success {sum(r['end'] == 'success' for r in rows)}/{len(rows)}")
    progress.close()
    return rows


def ordered_map(fn: Callable, jobs: Iterable, workers: int, initializer: Callable, initargs: tuple,
                in_flight_per_worker: int = 2, backend: str = "local") -> Iterator:
    """`fn(job)` for every job, yielded in job order: in this process when `workers <= 1`, else on a pool of
    spawned worker processes (each set up once by `initializer(*initargs)`: one simulator per process).
    At most `in_flight_per_worker * workers` jobs are outstanding, so results (a recorded episode holds up
    to ~240 MB of frames) never pile up faster than the caller consumes them. Closing the iterator early
    terminates the pool. `backend="ray"`: the workers are Ray actors (`ray_env.ordered_map`)."""
    if backend == "ray":
        from chess_sim.sim.ray_env import ordered_map as ray_ordered_map

        yield from ray_ordered_map(fn, jobs, workers, initializer, initargs, in_flight_per_worker)
        return
    if workers <= 1:
        initializer(*initargs)
        yield from map(fn, jobs)
        return
    jobs = iter(jobs)
    with mp.get_context("spawn").Pool(workers, initializer=initializer, initargs=initargs) as pool:
        first = itertools.islice(jobs, in_flight_per_worker * workers)
        pending = deque(pool.apply_async(fn, (job,)) for job in first)
        while pending:
            result = pending.popleft().get()
            pending.extend(pool.apply_async(fn, (job,)) for job in itertools.islice(jobs, 1))
            yield result
