"""VecChessEnv: many ChessEnv simulators in worker processes, stepped together one chunk at a time.

`reset_many({worker: (seed, index)})` and `step_many({worker: chunk (T, 6)})` send every named worker its
command first and then collect the answers, so the simulators run in parallel. A worker that dies (crash,
kill) is restarted and its episode reset from the start: its answer then carries `info["restarted"] = True`
with the fresh reset observation (reward 0, not done), the caller drops what it had of that episode, and
`restarts` counts it. `make_vec_env(..., backend="ray")` gives the same contract over Ray actors
(`ray_env.py`): only the transport (`_start`, `_exchange`, `_stop`, `close`, `pid`) differs.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from chess_sim.config import BACKENDS, EnvConfig, RewardConfig


class StepResult(NamedTuple):
    observation: dict
    reward: float
    terminated: bool
    truncated: bool
    info: dict


@dataclass(frozen=True)
class WorkerError:
    """A command the simulator refused or failed (e.g. a non-finite action): sent back instead of an answer,
    raised in the caller. Only a dead process is restarted; re-running an episode would fail the same way."""

    message: str


def _serve(connection, cfg: EnvConfig, reward: RewardConfig | None) -> None:
    simulator = Simulator(cfg, reward)
    try:
        while True:
            command, payload = connection.recv()
            if command == "close":
                break
            connection.send(answer(simulator, command, payload))
    except (EOFError, KeyboardInterrupt):
        pass
    finally:
        simulator.close()


class Simulator:
    """What a worker serves: a ChessEnv (rendering through EGL unless the caller chose another backend) and the
    scripted expert beside it."""

    def __init__(self, cfg: EnvConfig, reward: RewardConfig | None):
        os.environ.setdefault("MUJOCO_GL", "egl")
        from chess_sim.sim.env import ChessEnv
        from chess_sim.sim.expert import ExpertDriver

        self.env = ChessEnv(cfg, reward)
        self.expert = ExpertDriver(self.env)

    def close(self) -> None:
        self.env.close()


def answer(simulator: Simulator, command: str, payload):
    """A worker's answer to one command, or a `WorkerError` when the simulator refused or failed it."""
    try:
        return _answer(simulator, command, payload)
    except Exception as error:  # noqa: BLE001 - reported to the caller, which decides
        return WorkerError(f"{type(error).__name__}: {error}")


def _answer(simulator: Simulator, command: str, payload):
    env = simulator.env
    if command == "reset":
        seed, index, options = payload
        observation, info = env.reset(seed=seed, options={"index": index})
        if options.get("check_expert"):
            info["expert_solvable"] = simulator.expert.solves()
        return observation, info
    started, rendered = time.perf_counter(), env.render_seconds
    what, film = payload
    answer = env.step_chunk(what, film=film) if command == "step" else simulator.expert.chunk(what, film=film)
    info = answer[-1]
    info["render_s"] = env.render_seconds - rendered
    info["physics_s"] = time.perf_counter() - started - info["render_s"]
    return answer


def make_vec_env(n: int, cfg: EnvConfig, seconds: float | None = None, reward: RewardConfig | None = None,
                 backend: str = "local") -> "VecChessEnv":
    if backend == "ray":
        from chess_sim.sim.ray_env import RayVecChessEnv

        return RayVecChessEnv(n, cfg, seconds, reward)
    if backend != "local":
        raise ValueError(f"unknown simulator backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    return VecChessEnv(n, cfg, seconds, reward)


class VecChessEnv:
    """`n` simulators in spawned worker processes; episodes of `seconds` (None: the config's length), rewards
    from `reward` (None: the default terms)."""

    def __init__(self, n: int, cfg: EnvConfig, seconds: float | None = None, reward: RewardConfig | None = None):
        if n < 1:
            raise ValueError(f"VecChessEnv needs at least one worker, got {n}")
        self.cfg = cfg if seconds is None else replace(cfg, episode_seconds=seconds)
        self.n = n
        self.reward = reward
        self.restarts = 0
        self._context = mp.get_context("spawn")
        self._workers: list = [None] * n
        self._jobs: list = [None] * n
        """The (seed, index, options) each worker is running: what a restart re-runs."""
        for worker in range(n):
            self._start(worker)

    def _start(self, worker: int) -> None:
        parent, child = self._context.Pipe()
        process = self._context.Process(target=_serve, args=(child, self.cfg, self.reward), daemon=True)
        process.start()
        child.close()
        self._workers[worker] = (process, parent)

    def pid(self, worker: int) -> int:
        return self._workers[worker][0].pid

    def reset_many(self, jobs: dict[int, tuple]) -> dict[int, tuple[dict, dict]]:
        """{worker: (seed, index) or (seed, index, options)} -> {worker: (observation, info)}."""
        for worker, job in jobs.items():
            seed, index, *rest = job
            self._jobs[worker] = (seed, index, rest[0] if rest else {})
        results = self._exchange({worker: ("reset", self._jobs[worker]) for worker in jobs})
        out = {}
        for worker, answer in results.items():
            if answer is None:  # died during the reset: the restart already reset it
                out[worker] = self._restarted(worker)
            else:
                out[worker] = answer
        return out

    def step_many(self, chunks: dict[int, np.ndarray], film: frozenset[int] = frozenset()) -> dict[int, StepResult]:
        """{worker: chunk (T, 6)} -> {worker: StepResult}; workers in `film` also return every step's camera
        images in `info["frames"]`. See the module docstring for restarts."""
        return self._answers({worker: ("step", (np.asarray(chunk), worker in film))
                              for worker, chunk in chunks.items()})

    def expert_many(self, steps: dict[int, int], film: frozenset[int] = frozenset()) -> dict[int, StepResult]:
        """{worker: T}: the scripted expert drives each named simulator for up to T steps (as `step_many`)."""
        return self._answers({worker: ("expert", (count, worker in film)) for worker, count in steps.items()})

    def _answers(self, messages: dict[int, tuple]) -> dict[int, StepResult]:
        results = self._exchange(messages)
        out = {}
        for worker, answer in results.items():
            if answer is None:
                observation, info = self._restarted(worker)
                out[worker] = StepResult(observation, 0.0, False, False, info)
            else:
                out[worker] = StepResult(*answer)
        return out

    def _exchange(self, messages: dict[int, tuple]) -> dict[int, object]:
        """Send all, then receive all; a dead worker answers None (after being restarted)."""
        sent = {}
        for worker, message in messages.items():
            try:
                self._workers[worker][1].send(message)
                sent[worker] = True
            except (BrokenPipeError, OSError):
                sent[worker] = False
        answers = {}
        for worker in messages:
            answer = None
            if sent[worker]:
                try:
                    answer = self._workers[worker][1].recv()
                except (EOFError, ConnectionResetError, OSError):
                    answer = None
            answers[worker] = answer
        raise_worker_errors(answers)
        return answers

    def _stop(self, worker: int) -> None:
        process, connection = self._workers[worker]
        connection.close()
        process.join(timeout=1.0)
        if process.is_alive():
            process.kill()

    def _restarted(self, worker: int) -> tuple[dict, dict]:
        self._stop(worker)
        self.restarts += 1
        self._start(worker)
        answer = self._exchange({worker: ("reset", self._jobs[worker])})[worker]
        if answer is None:
            raise RuntimeError(f"simulator worker {worker} died again right after a restart")
        observation, info = answer
        return observation, {**info, "restarted": True}

    def close(self) -> None:
        for process, connection in self._workers:
            try:
                connection.send(("close", None))
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


def raise_worker_errors(answers: dict[int, object]) -> None:
    for worker, answer in answers.items():
        if isinstance(answer, WorkerError):
            raise RuntimeError(f"simulator worker {worker}: {answer.message}")
