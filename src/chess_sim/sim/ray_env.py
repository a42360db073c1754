"""The Ray backend of `VecChessEnv`: each simulator is a Ray actor, placed anywhere in a cluster.

The contract is VecChessEnv's (`reset_many`, `step_many`, `expert_many`, `submit`/`collect`, `restarts`, `close`),
with actors in place of worker processes, one per simulator up to the cluster's CPU count: commands go out to
every actor first and the answers (observations travel in Ray's object store) are gathered after, so the
simulators run in parallel. An actor lost with its process or node is replaced by a new one, which resets
its episode from the start (`info["restarted"]`), exactly as a dead local worker. Same scenes and same outcomes
as the local backend: each actor runs the same `ChessEnv`, and the policy stays in the driver.

`connect(address)` starts a local Ray instance (address None) or joins a cluster (`auto`, or HOST:PORT, which is
checked to answer first: Ray itself waits minutes on an address where nothing listens).
"""

from __future__ import annotations

import os
import socket
from collections import deque

from chess_sim.config import EnvConfig, RewardConfig
from chess_sim.errors import first_line
from chess_sim.sim import host, vec_env


class RayBackendError(Exception):
    """Ray is missing or its cluster cannot be reached (one-line message for the CLI)."""


def connect(address: str | None = None, num_cpus: int | None = None) -> None:
    """Join the Ray cluster at `address` (None: start a local one with `num_cpus`); a no-op when connected."""
    try:
        import ray
    except ImportError:
        raise RayBackendError("the ray backend needs Ray: pip install 'chess-sim[ray]'") from None
    if address not in (None, "auto"):
        _check_reachable(address)
    if ray.is_initialized():
        return
    options = dict(include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        if address is None:
            ray.init(num_cpus=num_cpus, **options)
        else:
            ray.init(address=address, **options)
    except ConnectionError as error:
        raise RayBackendError(f"cannot join a Ray cluster at {address!r}: {first_line(error)}") from None


def _check_reachable(address: str, timeout: float = 5.0) -> None:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise RayBackendError(f"--ray-address must be auto or HOST:PORT, got {address!r}")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            pass
    except OSError as error:
        raise RayBackendError(f"no Ray cluster answers at {address} ({error.strerror or error})") from None


class _Host(host.Host):
    """The actor: a `host.Host` of its simulators (one, unless the cluster has fewer CPUs than simulators),
    answering VecChessEnv's command batches."""

    def pid(self) -> int:
        return os.getpid()


class RayVecChessEnv(vec_env.VecChessEnv):
    """`n` simulators in Ray actors of `cpus` CPUs each, in the cluster `connect` joined (a local Ray instance
    if none): one actor per simulator while the cluster has the CPUs for them, else as many actors as it has
    CPUs, each hosting several simulators (an actor that cannot be placed would wait forever). The policy decides
    in the driver: an actor's batches would mostly hold one decision."""

    hosts_actors = False

    def __init__(self, n: int, cfg: EnvConfig, seconds: float | None = None, reward: RewardConfig | None = None,
                 cpus: float = 1.0):
        import ray

        connect()
        self._actor_class = ray.remote(num_cpus=cpus, max_restarts=0)(_Host)
        self._pending: dict[int, deque] = {}
        """Each actor's submitted calls (object references), oldest first."""
        actors = max(1, int(ray.cluster_resources().get("CPU", 1) // cpus))
        super().__init__(n, cfg, seconds, reward, processes=min(n, actors))

    def _start(self, worker: int) -> None:
        self._workers[worker] = self._actor_class.remote(self.cfg, self.reward, self.envs_of(worker))
        self._pending[worker] = deque()  # answers of a replaced actor are never awaited

    def pid(self, env: int) -> int:
        import ray

        return ray.get(self._workers[env % self.processes].pid.remote())

    def _send(self, worker: int, batch: list) -> bool:
        self._pending[worker].append(self._workers[worker].answer_all.remote(batch))
        return True

    def _receive(self, worker: int) -> list | None:
        """The actor's next answer list, or None when the actor was lost."""
        import ray

        try:
            return ray.get(self._pending[worker].popleft())
        except (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError):
            return None

    def _stop(self, worker: int) -> None:
        import ray

        ray.kill(self._workers[worker], no_restart=True)

    def close(self) -> None:
        for worker in range(self.processes):
            if self._workers[worker] is not None:
                self._stop(worker)


class _Runner:
    """The actor of `ordered_map`: set up once by `initializer(*initargs)`, then runs `fn(job)`."""

    def __init__(self, initializer, initargs: tuple):
        initializer(*initargs)

    def run(self, fn, job):
        return fn(job)


def ordered_map(fn, jobs, workers: int, initializer, initargs: tuple, in_flight_per_worker: int = 2,
                cpus: float = 1.0):
    """`sim.episodes.ordered_map` over Ray actors: `fn(job)` for every job, yielded in job order, at most
    `in_flight_per_worker * workers` outstanding; a job whose actor is lost runs again on a replacement."""
    import itertools
    from collections import deque

    import ray

    connect()
    runner = ray.remote(num_cpus=cpus, max_restarts=0)(_Runner)
    actors = [runner.remote(initializer, initargs) for _ in range(workers)]
    jobs = iter(jobs)
    pending: deque = deque()
    turn = itertools.count()

    def submit(job, slot: int) -> None:
        pending.append((job, slot, actors[slot].run.remote(fn, job)))

    try:
        for job in itertools.islice(jobs, in_flight_per_worker * workers):
            submit(job, next(turn) % workers)
        while pending:
            job, slot, reference = pending.popleft()
            try:
                result = ray.get(reference)
            except (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError):
                actors[slot] = runner.remote(initializer, initargs)
                pending.appendleft((job, slot, actors[slot].run.remote(fn, job)))
                continue
            for job in itertools.islice(jobs, 1):
                submit(job, next(turn) % workers)
            yield result
    finally:
        for actor in actors:
            ray.kill(actor, no_restart=True)
