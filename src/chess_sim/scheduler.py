"""Episodes over parallel simulators: the loop shared by evaluation and RL rollouts.

The simulators form groups that take turns (two by default), so the policy's work overlaps the simulators':
while one group's simulators execute their chunks, the driver decides for the next group in one policy batch.
Each turn of a group: collect its answers, hand them to the driver, then send in one batch a reset for every idle
simulator (the next pending scene) and a chunk for every running episode. Each chunk holds the next pending scene
in reserve: a simulator whose episode ends within its chunk resets to that scene at once, so the new episode's
first decision comes at the group's next turn (no turn spent on a reset alone, which would leave a row of the
policy's batch empty); reserved scenes not taken go back to the front of the queue. A simulator that died is
restarted by `VecChessEnv`, and its episode starts again from its reset: the driver is told to forget it. The
schedule depends only on the episodes' lengths, so a run is reproducible for a given number of simulators and
groups.

A driver that offers an actor (`RemoteDriver`), on simulators that host one (`VecChessEnv.hosts_actors`: the local
backend), decides in the simulators' processes instead: each process holds a copy of its policy
(`VecChessEnv.set_actor`), the groups are the processes (`groups` is not used), and a turn sends each running
episode the driver's random draws for its decision (`RemoteDriver.draws`) in an `act` command: the process decides
for all its episodes in one batch and steps them, and the decisions come back with the results. No process of the
policy's own then competes with the simulators for the cores. The schedule, and with it the run's random stream,
is then reproducible for a given number of simulators and processes.
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
        """Take a chunk's `StepResult`; True when the episode is over, which is when the result is terminated or
        truncated (the simulator then goes on with its reserved scene)."""

    def forget(self, episode: Any) -> None:
        """The episode's simulator died; it will be started again from its reset."""

    def filmed(self, index: int) -> bool:
        """Whether scene `index` is filmed: its simulator returns the camera frames at the reset and after every
        step (`info["frames"]`)."""


class RemoteDriver(Driver, Protocol):
    """A driver that can decide in the simulators' processes."""

    def actor(self) -> Any:
        """The policy for the simulators' processes to decide with (see `sim/host.py`), or None to `decide` here."""

    def draws(self, episodes: dict[int, Any]) -> dict[int, Any]:
        """With an actor: {worker: the random draws of its episode's next decision} for every running episode."""


def groups_of(vec, groups: int) -> list[list[int]]:
    """Simulators split into `groups` turns, each holding simulators of every process (simulator e lives in
    process e % processes): whichever group is simulating keeps every core busy. Empty groups are left out."""
    members = [[env for env in range(vec.n) if (env // vec.processes) % groups == g] for g in range(groups)]
    return [group for group in members if group]


def drive(vec, seed: int, indices: list[int], driver: Driver, options: dict | None = None,
          clock: dict | None = None, groups: int = 2) -> None:
    """Run scenes `(seed, i)` for i in `indices` to their ends, the simulators in `groups` alternating groups (or
    one group per process when the driver's actor decides there, see the module docstring). `clock` (optional)
    accumulates seconds under `decide` (the driver deciding, or drawing for the processes) and `env` (waiting for
    the simulators) and counts `rounds` (group turns)."""
    hosted = getattr(vec, "hosts_actors", False) and hasattr(driver, "actor")
    actor = driver.actor() if hosted else None
    if actor is not None:
        vec.set_actor(actor)
    clock = clock if clock is not None else {}
    for key in ("decide", "env", "rounds"):
        clock.setdefault(key, 0)
    pending = deque(indices)
    active: dict[int, tuple[int, Any]] = {}
    in_flight: dict[int, tuple[Any, dict[int, int], dict[int, int]]] = {}
    """Each group's submitted ticket, the scenes its resets start and the scenes its chunks hold in reserve."""
    members = [vec.envs_of(p) for p in range(vec.processes)] if actor is not None else groups_of(vec, groups)
    options = options or {}
    turn = 0
    while True:
        group = turn % len(members)
        turn += 1
        if group in in_flight:
            ticket, starts, reserved = in_flight.pop(group)
            began = time.perf_counter()
            answers = vec.collect(ticket)
            clock["env"] += time.perf_counter() - began
            pending.extendleft(reversed(_take(answers, starts, reserved, active, driver)))
        commands, starts, reserved = _commands(members[group], active, pending, driver, seed, options, clock,
                                               remote=actor is not None)
        if commands:
            in_flight[group] = (vec.submit(commands), starts, reserved)
            clock["rounds"] += 1
        if not in_flight and not pending and not active:
            return


def _take(answers: dict, starts: dict[int, int], reserved: dict[int, int], active: dict, driver: Driver) -> list[int]:
    """Hand a group's answers to the driver: new episodes start, results step theirs (or restart them, or go on
    with the reserved scene); returns the reserved scenes no simulator took, in the order they were reserved."""
    untaken = dict(reserved)
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
            if answer.next_episode is not None:
                scene = untaken.pop(worker)
                active[worker] = (scene, driver.start(scene, *answer.next_episode))
        else:
            assert answer.next_episode is None, "the simulator went on to a new scene while the driver did not"
    return list(untaken.values())


def _commands(members: list[int], active: dict, pending: deque, driver: Driver, seed: int, options: dict,
              clock: dict, remote: bool) -> tuple[dict, dict[int, int], dict[int, int]]:
    """A group's next batch: a reset for each idle simulator while scenes remain, and a chunk for each running
    episode (decided now, in one policy batch, or with `remote` its draws for its process to decide with) with
    the next pending scene in reserve. Returns the commands, the scenes the resets start and the scenes reserved,
    by simulator."""
    def job(index: int) -> tuple:
        return seed, index, {**options, "film": True} if driver.filmed(index) else options

    commands: dict[int, tuple] = {}
    starts, reserved = {}, {}
    for worker in members:
        if worker not in active and pending:
            index = starts[worker] = pending.popleft()
            commands[worker] = ("reset", job(index))
    running = {worker: active[worker][1] for worker in members if worker in active}
    if running:
        began = time.perf_counter()
        chunks = driver.draws(running) if remote else driver.decide(running)
        clock["decide"] += time.perf_counter() - began
        for worker in running:
            film = driver.filmed(active[worker][0])
            then = job(reserved.setdefault(worker, pending.popleft())) if pending else None
            commands[worker] = ("expert", (CHUNK, film, then)) if chunks is None else \
                ("act" if remote else "step", (chunks[worker], film, then))
    return commands, starts, reserved
