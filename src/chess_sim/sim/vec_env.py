"""VecChessEnv: many ChessEnv simulators in a few worker processes, stepped together one chunk at a time.

`--envs` counts simulators; they live in `processes` worker processes (one per core by default), several to a
process, so one policy batch serves many episodes while every core simulates. Simulator `e` lives in process
`e % processes`. `reset_many({env: (seed, index)})` and `step_many({env: chunk (T, 6)})` send every process its
simulators' commands first and then collect the answers, so the processes run in parallel (each steps its own
simulators one after another). A process that dies (crash, kill) is restarted and every episode it held is reset
from the start: that simulator's next answer carries `info["restarted"] = True` with the fresh reset observation
(reward 0, not done), the caller drops what it had of that episode, and `restarts` counts the processes
restarted. `make_vec_env(..., backend="ray")` gives the same contract over Ray actors (`ray_env.py`), one per
simulator while the cluster has the CPUs: only the transport (`_start`, `_send`, `_receive`, `_stop`, `close`,
`pid`) differs.
Worker processes run single-threaded (BLAS and the software rasteriser): one process per core.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import pickle
from collections import deque
from dataclasses import dataclass, field, replace
from typing import NamedTuple

import numpy as np

from chess_sim.config import EnvConfig, RewardConfig
from chess_sim.sim.host import WorkerError, serve

SINGLE_THREADED = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "LP_NUM_THREADS": "0"}
"""The environment of worker processes: each is one core's work, so its libraries must not spawn threads that
compete with the other workers (llvmpipe and OpenBLAS would start one per core). llvmpipe with 0 threads
rasterises in the calling thread: the same pixels, less CPU per frame than handing each frame to one helper
thread."""


class StepResult(NamedTuple):
    observation: dict
    reward: float
    terminated: bool
    truncated: bool
    info: dict
    next_episode: tuple[dict, dict] | None = None
    """(observation, info) of the scene the simulator reset to when the episode ended within the chunk and the
    command named a scene to go on with (`submit`)."""


class _Restarted(NamedTuple):
    observation: dict
    info: dict


def _as_result(command: str, answer):
    """A worker's raw answer as the caller gets it: steps as StepResult (a restarted episode: its fresh reset,
    reward 0, not done), resets as (observation, info)."""
    if command == "reset":
        return (answer.observation, answer.info) if isinstance(answer, _Restarted) else answer
    if command == "physics":
        return answer
    if isinstance(answer, _Restarted):  # a step, an expert chunk or an act
        return StepResult(answer.observation, 0.0, False, False, answer.info)
    return StepResult(*answer)


@dataclass
class Ticket:
    """Commands submitted to the simulators and not yet collected (`VecChessEnv.submit`)."""

    commands: dict[int, str]
    """The command of every simulator asked."""
    batches: dict[int, list] = field(default_factory=dict)
    """What each process was sent: [(env, command, payload)]."""
    generations: dict[int, int] = field(default_factory=dict)
    """Each process's restart count when sent: a later restart answers from its resets."""
    sent: set[int] = field(default_factory=set)
    """The processes the batches reached (a dead one is restarted when collected)."""
    ready: dict[int, object] = field(default_factory=dict)
    """Answers known without asking: restarted episodes not yet delivered."""
    then: dict[int, tuple] = field(default_factory=dict)
    """The scene each simulator asked to step goes on with if its episode ends: (seed, index, options)."""


class VecChessEnv:
    """`n` simulators in `processes` spawned worker processes (None: one per core, at most `n`); episodes of
    `seconds` (None: the config's length), rewards from `reward` (None: the default terms)."""

    hosts_actors = True
    """Whether a scheduler's driver may decide in these processes (`set_actor`): each holds several simulators, so
    one policy batch serves them all."""

    def __init__(self, n: int, cfg: EnvConfig, seconds: float | None = None, reward: RewardConfig | None = None,
                 processes: int | None = None):
        if n < 1:
            raise ValueError(f"VecChessEnv needs at least one worker, got {n}")
        if processes is not None and processes < 1:
            raise ValueError(f"VecChessEnv needs at least one process, got {processes}")
        self.cfg = cfg if seconds is None else replace(cfg, episode_seconds=seconds)
        self.n = n
        self.processes = min(n, processes or os.cpu_count() or 1)
        self.reward = reward
        self.restarts = 0
        self._context = mp.get_context("spawn")
        self._workers: list = [None] * self.processes
        self._jobs: list = [None] * n
        """The (seed, index, options) each simulator is running: what a restart re-runs."""
        self._restarted: dict[int, _Restarted] = {}
        """Fresh resets of simulators whose process died while they were not being asked: their next answer."""
        self._generations = [0] * self.processes
        """Restarts of each process so far."""
        self._in_flight: deque[Ticket] = deque()
        self._actor: bytes | None = None
        """The pickled actor every process holds (`set_actor`): a restarted process is given it again."""
        for worker in range(self.processes):
            self._start(worker)

    def envs_of(self, worker: int) -> list[int]:
        """The simulators that live in worker process `worker`."""
        return list(range(worker, self.n, self.processes))

    def _start(self, worker: int) -> None:
        parent, child = self._context.Pipe()
        process = self._context.Process(target=serve, args=(child, self.cfg, self.reward, self.envs_of(worker)),
                                        daemon=True)
        with _environment(SINGLE_THREADED):
            process.start()
        child.close()
        self._workers[worker] = (process, parent)

    def pid(self, env: int) -> int:
        """The process id of the worker that runs simulator `env`."""
        return self._workers[env % self.processes][0].pid

    def reset_many(self, jobs: dict[int, tuple]) -> dict[int, tuple[dict, dict]]:
        """{env: (seed, index) or (seed, index, options)} -> {env: (observation, info)}."""
        return self._exchange({env: ("reset", job) for env, job in jobs.items()})

    def step_many(self, chunks: dict[int, np.ndarray], film: frozenset[int] = frozenset()) -> dict[int, StepResult]:
        """{env: chunk (T, 6)} -> {env: StepResult}; simulators in `film` also return every step's camera
        images in `info["frames"]`. See the module docstring for restarts."""
        return self._exchange({env: ("step", (np.asarray(chunk), env in film)) for env, chunk in chunks.items()})

    def expert_many(self, steps: dict[int, int], film: frozenset[int] = frozenset()) -> dict[int, StepResult]:
        """{env: T}: the scripted expert drives each named simulator for up to T steps (as `step_many`)."""
        return self._exchange({env: ("expert", (count, env in film)) for env, count in steps.items()})

    def physics_many(self, chunks: dict[int, np.ndarray], advance: bool = False) -> dict[int, float]:
        """{env: chunk (T, 6)} -> {env: seconds of `mj_step` alone for the chunk} (`ChessEnv.time_physics`: the
        episodes are left as they were, or with `advance` moved on by their chunks): raw physics speed on these
        same processes, for benchmarks."""
        return self._exchange({env: ("physics", (np.asarray(chunk), advance)) for env, chunk in chunks.items()})

    def set_actor(self, actor) -> None:
        """Give every process a copy of `actor` (see `host.py`), which decides for its simulators at their `act`
        commands; None takes it away. Waits until every process holds it; no commands may be in flight."""
        if self._in_flight:
            raise RuntimeError("set_actor waits for every submitted ticket to be collected")
        pickled = None if actor is None else pickle.dumps(actor, pickle.HIGHEST_PROTOCOL)
        self._actor = None  # what a restart gives a process: only an actor every process took
        sent = [worker for worker in range(self.processes) if self._send(worker, [(None, "actor", pickled)])]
        replies = {worker: self._receive(worker) for worker in sent}
        for worker, reply in replies.items():
            if reply is not None and isinstance(reply[0], WorkerError):
                raise RuntimeError(f"simulator process {worker}: {reply[0].message}")
        self._actor = pickled
        for worker in range(self.processes):
            if replies.get(worker) is None:  # died: restarted with the actor
                self._restart(worker, [])

    def _exchange(self, commands: dict[int, tuple]) -> dict[int, object]:
        return self.collect(self.submit(commands))

    def submit(self, commands: dict[int, tuple[str, object]]) -> "Ticket":
        """Send commands without waiting: {env: ("reset", (seed, index[, options])) | ("step", (chunk, film[, then]))
        | ("expert", (T, film[, then])) | ("act", (draws, film[, then])) | ("physics", (chunk, advance))} (`act`:
        see `host.py`, after `set_actor`). A step, expert chunk or act with `then` =
        (seed, index[, options]) resets the simulator to that scene as soon as its episode ends within the chunk
        (its answer's `next_episode`), saving the caller a round trip; None goes on with nothing. The simulators
        work while the caller does something else; `collect` the tickets in the order they were submitted (each
        process answers in order)."""
        ticket = Ticket(commands={env: command for env, (command, _) in commands.items()})
        for env, (command, payload) in commands.items():
            if command == "reset":
                payload = self._jobs[env] = _job(payload)
                self._restarted.pop(env, None)  # a new episode replaces the one a restart re-ran
            elif command in ("step", "expert", "act") and len(payload) == 3 and payload[2] is not None:
                what, film, then = payload
                payload = (what, film, ticket.then.setdefault(env, _job(then)))
            if env in self._restarted:
                ticket.ready[env] = self._restarted.pop(env)
            else:
                ticket.batches.setdefault(env % self.processes, []).append((env, command, payload))
        for worker, batch in ticket.batches.items():
            ticket.generations[worker] = self._generations[worker]
            if self._send(worker, batch):
                ticket.sent.add(worker)
        self._in_flight.append(ticket)
        return ticket

    def collect(self, ticket: "Ticket") -> dict[int, object]:
        """The answers of a submitted ticket, by env: StepResult for steps, (observation, info) for resets,
        seconds for physics; a simulator whose process died answers its restarted episode (see the module
        docstring)."""
        if not self._in_flight or self._in_flight[0] is not ticket:
            raise RuntimeError("tickets must be collected in the order they were submitted")
        self._in_flight.popleft()
        answers = dict(ticket.ready)
        for worker, batch in ticket.batches.items():
            envs = [env for env, _, _ in batch]
            if ticket.generations[worker] != self._generations[worker]:
                # restarted after this was sent: the restart reset these episodes
                answers.update({env: self._restarted.pop(env) for env in envs})
                continue
            replies = self._receive(worker) if worker in ticket.sent else None
            answers.update(self._restart(worker, envs) if replies is None else zip(envs, replies))
        raise_worker_errors(answers)
        results = {env: _as_result(ticket.commands[env], answers[env]) for env in ticket.commands}
        for env, then in ticket.then.items():
            if results[env].next_episode is not None:
                self._jobs[env] = then  # what a restart re-runs from now on
        return results

    def _send(self, worker: int, batch: list) -> bool:
        try:
            self._workers[worker][1].send_bytes(pickle.dumps(batch, pickle.HIGHEST_PROTOCOL))
            return True
        except (BrokenPipeError, OSError):
            return False

    def _receive(self, worker: int) -> list | None:
        """The next answer list of a process, or None when it died."""
        try:
            return pickle.loads(self._workers[worker][1].recv_bytes())
        except (EOFError, ConnectionResetError, OSError):
            return None

    def _restart(self, worker: int, asked: list[int]) -> dict[int, _Restarted]:
        """Restart a dead process and reset every episode it held: answers for the simulators `asked` now, the
        others' kept for their next command (or for tickets already in flight to the dead process)."""
        self._stop(worker)
        self.restarts += 1
        self._generations[worker] += 1
        self._start(worker)
        envs = [env for env in self.envs_of(worker) if self._jobs[env] is not None]
        replies = None
        batch = [(env, "reset", self._jobs[env]) for env in envs]
        if self._send(worker, ([(None, "actor", self._actor)] if self._actor is not None else []) + batch):
            replies = self._receive(worker)
        if replies is None:
            raise RuntimeError(f"simulator process {worker} died again right after a restart")
        if self._actor is not None:
            actor_reply, *replies = replies
            raise_worker_errors({f"process {worker}": actor_reply})
        raise_worker_errors(dict(zip(envs, replies)))
        fresh = {env: _Restarted(observation, {**info, "restarted": True})
                 for env, (observation, info) in zip(envs, replies)}
        self._restarted.update({env: answer for env, answer in fresh.items() if env not in asked})
        return {env: fresh[env] for env in asked}

    def _stop(self, worker: int) -> None:
        process, connection = self._workers[worker]
        connection.close()
        process.join(timeout=1.0)
        if process.is_alive():
            process.kill()

    def close(self) -> None:
        for process, connection in self._workers:
            try:
                connection.send_bytes(pickle.dumps(None))
            except (BrokenPipeError, OSError):
                pass
            connection.close()
            process.join(timeout=5.0)
            if process.is_alive():
                process.kill()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _job(payload: tuple) -> tuple[int, int, dict]:
    """A reset's (seed, index[, options]) as (seed, index, options)."""
    seed, index, *rest = payload
    return seed, index, rest[0] if rest else {}


@contextlib.contextmanager
def _environment(variables: dict[str, str]):
    """Set environment variables for what starts inside (a spawned process copies them), then restore them."""
    saved = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def raise_worker_errors(answers: dict[int, object]) -> None:
    for env, answer in answers.items():
        if isinstance(answer, WorkerError):
            raise RuntimeError(f"simulator {env}: {answer.message}")
