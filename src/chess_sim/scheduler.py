"""Episodes over parallel simulators: the loop shared by evaluation and RL rollouts.

The simulators form groups that take turns (two by default), so the policy's work overlaps the simulators':
while one group's simulators execute their chunks, the driver decides for the next group in one policy batch.
Each turn of a group: collect its answers, hand them to the driver, then send in one batch a chunk for every
running episode and a reset for every idle simulator (the next pending scene); an episode's first decision comes
at its group's turn after the reset. A simulator that died is restarted by `VecChessEnv`, and its episode starts
again from its reset: the driver is told to forget it. The schedule depends only on the episodes' lengths, so a
run is reproducible for a given number of simulators and groups.
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
        """{worker: actions (S, 6) to execute} for every running episode, or None to let the scripted expert
        drive."""

    def step(self, episode: Any, result) -> bool:
        """Take a chunk's `StepResult`; True when the episode is over."""

    def forget(self, episode: Any) -> None:
        """The episode's simulator died; it will be started again from its reset."""

    def filmed(self, index: int) -> bool:
        """Whether scene `index` is filmed: its simulator returns the camera frames at the reset and after every
        step (`info["frames"]`)."""


def groups_of(vec, groups: int) -> list[list[int]]:
    """Simulators split into `groups` turns, each holding simulators of every process (simulator e lives in
    process e % processes): whichever group is simulating keeps every core busy. Empty groups are left out."""
    members = [[env for env in range(vec.n) if (env // vec.processes) % groups == g] for g in range(groups)]
    return [group for group in members if group]


def drive(vec, seed: int, indices: list[int], driver: Driver, options: dict | None = None,
          clock: dict | None = None, groups: int = 2) -> None:
    """Run scenes `(seed, i)` for i in `indices` to their ends, the simulators in `groups` alternating groups.
    `clock` (optional) accumulates seconds under `decide` (the driver) and `env` (waiting for the simulators)
    and counts `rounds` (group turns)."""
    clock = clock if clock is not None else {}
    for key in ("decide", "env", "rounds"):
        clock.setdefault(key, 0)
    pending = deque(indices)
    active: dict[int, tuple[int, Any]] = {}
    in_flight: dict[int, tuple[Any, dict[int, int]]] = {}
    """Each group's submitted ticket and the scenes its resets start."""
    members = groups_of(vec, groups)
    options = options or {}
    turn = 0
    while True:
        group = turn % len(members)
        turn += 1
        if group in in_flight:
            ticket, starts = in_flight.pop(group)
            began = time.perf_counter()
            answers = vec.collect(ticket)
            clock["env"] += time.perf_counter() - began
            _take(answers, starts, active, driver)
        commands, starts = _commands(members[group], active, pending, driver, seed, options, clock)
        if commands:
            in_flight[group] = (vec.submit(commands), starts)
            clock["rounds"] += 1
        if not in_flight and not pending and not active:
            return


def _take(answers: dict, starts: dict[int, int], active: dict, driver: Driver) -> None:
    """Hand a group's answers to the driver: new episodes start, results step theirs (or restart them)."""
    for worker, answer in answers.items():
        if worker in starts:
            observation, info = answer
            active[worker] = (starts[worker], driver.start(starts[worker], observation, info))
            continue
        index, episode = active[worker]
        if answer.info.get("restarted"):
            driver.forget(episode)
            active[worker] = (index, driver.start(index, answer.observation, answer.info))
        elif driver.step(episode, answer):
            del active[worker]


def _commands(members: list[int], active: dict, pending: deque, driver: Driver, seed: int, options: dict,
              clock: dict) -> tuple[dict, dict[int, int]]:
    """A group's next batch: a chunk for each running episode (decided now, in one policy batch) and a reset
    for each idle simulator while scenes remain."""
    commands: dict[int, tuple] = {}
    running = {worker: active[worker][1] for worker in members if worker in active}
    if running:
        began = time.perf_counter()
        chunks = driver.decide(running)
        clock["decide"] += time.perf_counter() - began
        for worker in running:
            film = driver.filmed(active[worker][0])
            commands[worker] = ("expert", (CHUNK, film)) if chunks is None else ("step", (chunks[worker], film))
    starts = {}
    for worker in members:
        if worker not in active and pending:
            index = starts[worker] = pending.popleft()
            commands[worker] = ("reset", (seed, index, {**options, "film": True} if driver.filmed(index) else options))
    return commands, starts
