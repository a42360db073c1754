"""Episodes over parallel simulators: the loop shared by evaluation and RL rollouts.

Each round, every idle simulator starts the next pending scene, the driver decides one chunk for every running
episode at once (one policy batch), and all simulators execute their chunks in parallel. A simulator that died
is restarted by `VecChessEnv`, and its episode starts again from its reset: the driver is told to forget it.
The schedule depends only on the episodes' lengths, so a run is reproducible for a given number of simulators.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any, Protocol

import numpy as np

from chess_sim.config import CHUNK


class Driver(Protocol):
    def start(self, index: int, observation: dict, info: dict) -> Any:
        """A new episode of scene `index` begins: its per-episode state."""

    def decide(self, episodes: dict[int, Any]) -> dict[int, np.ndarray] | None:
        """{worker: chunk (T, 6)} for every running episode, or None to let the scripted expert drive."""

    def step(self, episode: Any, result) -> bool:
        """Take a chunk's `StepResult`; True when the episode is over."""

    def forget(self, episode: Any) -> None:
        """The episode's simulator died; it will be started again from its reset."""

    def filmed(self, episode: Any) -> bool:
        """Whether the simulator should return every step's camera images."""


def drive(vec, seed: int, indices: list[int], driver: Driver, options: dict | None = None,
          clock: dict | None = None) -> None:
    """Run scenes `(seed, i)` for i in `indices` to their ends. `clock` (optional) accumulates seconds under
    `reset`, `decide` and `env` and counts `rounds`."""
    clock = clock if clock is not None else {}
    for key in ("reset", "decide", "env", "rounds"):
        clock.setdefault(key, 0)
    pending = deque(indices)
    active: dict[int, tuple[int, Any]] = {}
    options = options or {}
    while pending or active:
        starts = {worker: pending.popleft() for worker in range(vec.n) if worker not in active and pending}
        if starts:
            began = time.perf_counter()
            resets = vec.reset_many({worker: (seed, index, options) for worker, index in starts.items()})
            clock["reset"] += time.perf_counter() - began
            for worker, (observation, info) in resets.items():
                active[worker] = (starts[worker], driver.start(starts[worker], observation, info))
        episodes = {worker: episode for worker, (_, episode) in active.items()}
        film = frozenset(worker for worker, episode in episodes.items() if driver.filmed(episode))
        began = time.perf_counter()
        chunks = driver.decide(episodes)
        decided = time.perf_counter()
        if chunks is None:
            results = vec.expert_many({worker: CHUNK for worker in episodes}, film=film)
        else:
            results = vec.step_many(chunks, film=film)
        clock["decide"] += decided - began
        clock["env"] += time.perf_counter() - decided
        clock["rounds"] += 1
        for worker, result in results.items():
            index, episode = active[worker]
            if result.info.get("restarted"):
                driver.forget(episode)
                active[worker] = (index, driver.start(index, result.observation, result.info))
            elif driver.step(episode, result):
                del active[worker]
