"""What a simulator worker process serves (`vec_env.VecChessEnv`; a Ray actor in `ray_env.py`): its simulators,
answering batches of commands in order, and, when given one, a copy of the policy that decides for them.

Commands, per simulator: `reset` (seed, index, options), `step` (chunk (T, 6), film[, then]), `expert` (T, film[,
then]), `physics` (chunk, advance) and `act` (draws, film[, then]). `act` asks the process's policy (the actor,
set by the host-wide command `actor` with the actor pickled, simulator None) for the simulator's next chunk from
its latest observation and the draws the caller made for it, then steps it: every `act` of a batch is decided in
one policy call, before the batch's commands run in order. The answer of an `act` is a step's, with the actor's
record of the decision in `info["decision"]`, the actions executed in `info["actions"]` and the decision's share
of the call's CPU seconds in `info["policy_s"]`. An actor is a callable (observations, instructions, draws) ->
[(chunk (S, 6), record)], given one entry of each list per simulator (draws: what its `act` carried).
"""

from __future__ import annotations

import os
import pickle
import time
from dataclasses import dataclass

from chess_sim.config import EnvConfig, RewardConfig


@dataclass(frozen=True)
class WorkerError:
    """A command the simulator refused or failed (e.g. a non-finite action): sent back instead of an answer,
    raised in the caller. Only a dead process is restarted; re-running an episode would fail the same way."""

    message: str


class Simulator:
    """What a worker serves for one simulator: a ChessEnv (rendering through EGL unless the caller chose another
    backend) and the scripted expert beside it."""

    def __init__(self, cfg: EnvConfig, reward: RewardConfig | None):
        os.environ.setdefault("MUJOCO_GL", "egl")
        from chess_sim.sim.env import ChessEnv
        from chess_sim.sim.expert import ExpertDriver

        self.env = ChessEnv(cfg, reward)
        self.expert = ExpertDriver(self.env)
        self.seen: tuple[dict, str] | None = None
        """The latest observation and instruction, after a reset or a chunk: what an `act` decides from."""

    def close(self) -> None:
        self.env.close()


class Host:
    """The simulators of one worker process, by simulator index, and the actor deciding for them."""

    def __init__(self, cfg: EnvConfig, reward: RewardConfig | None, envs: list[int]):
        self.simulators = {env: Simulator(cfg, reward) for env in envs}
        self.actor = None

    def answer_all(self, batch: list[tuple[int | None, str, object]]) -> list:
        acting = [(env, payload) for env, command, payload in batch if command == "act"]
        decided = self._decide(acting) if acting else {}
        return [self._answer(env, command, payload, decided) for env, command, payload in batch]

    def _answer(self, env: int | None, command: str, payload, decided: dict):
        if command == "actor":
            try:
                self.actor = pickle.loads(payload) if payload is not None else None
            except Exception as error:  # noqa: BLE001 - reported to the caller
                self.actor = None
                return WorkerError(f"the policy cannot be loaded here: {type(error).__name__}: {error}")
            return None
        if command != "act":
            return answer(self.simulators[env], command, payload)
        chosen = decided[env]
        if isinstance(chosen, WorkerError):
            return chosen
        chunk, record, seconds = chosen
        result = answer(self.simulators[env], "step", (chunk, *payload[1:]))
        if not isinstance(result, WorkerError):
            result[4].update(decision=record, actions=chunk, policy_s=seconds)
        return result

    def _decide(self, acting: list[tuple[int, tuple]]) -> dict:
        """{env: (chunk, record, CPU seconds) or WorkerError} for every `act` of a batch, in one policy call."""
        try:
            if self.actor is None:
                raise RuntimeError("no policy was given to this process (VecChessEnv.set_actor)")
            seen = [self.simulators[env].seen for env, _ in acting]
            if any(entry is None for entry in seen):
                raise RuntimeError("a simulator asked to act has not been reset")
            began = time.process_time()
            decided = self.actor([observation for observation, _ in seen], [text for _, text in seen],
                                 [payload[0] for _, payload in acting])
            seconds = (time.process_time() - began) / len(acting)
            return {env: (chunk, record, seconds) for (env, _), (chunk, record) in zip(acting, decided, strict=True)}
        except Exception as error:  # noqa: BLE001 - reported to the caller, which decides
            failed = WorkerError(f"{type(error).__name__}: {error}")
            return {env: failed for env, _ in acting}

    def close(self) -> None:
        for simulator in self.simulators.values():
            simulator.close()


def serve(connection, cfg: EnvConfig, reward: RewardConfig | None, envs: list[int]) -> None:
    """A worker process's loop: command batches in, answer lists out, both pickled (plain pickle: tensors in a
    decision's record travel as bytes, not as shared memory), until None."""
    host = Host(cfg, reward, envs)
    try:
        while True:
            batch = pickle.loads(connection.recv_bytes())
            if batch is None:
                break
            connection.send_bytes(pickle.dumps(host.answer_all(batch), pickle.HIGHEST_PROTOCOL))
    except (EOFError, BrokenPipeError, ConnectionResetError, KeyboardInterrupt):
        pass  # the learner is gone (killed, or interrupted): nothing is left to answer, and nothing to report
    finally:
        host.close()


def answer(simulator: Simulator, command: str, payload):
    """A simulator's answer to one command, or a `WorkerError` when it refused or failed it."""
    try:
        return _answer(simulator, command, payload)
    except Exception as error:  # noqa: BLE001 - reported to the caller, which decides
        return WorkerError(f"{type(error).__name__}: {error}")


def _answer(simulator: Simulator, command: str, payload):
    env = simulator.env
    started, rendered = time.process_time(), env.render_seconds
    if command == "reset":
        seed, index, options = payload
        observation, info = env.reset(seed=seed, options={"index": index})
        simulator.seen = observation, info["instruction"]
        info["reset_s"] = time.process_time() - started
        if options.get("film"):
            info["frames"] = [env.camera_images()]
        if options.get("check_expert"):
            info["expert_solvable"] = simulator.expert.solves()
        return observation, info
    if command == "physics":
        chunk, advance = payload
        if advance:
            simulator.seen = None  # moved on unobserved: nothing to decide from until the next reset
        return env.time_physics(chunk, advance)
    what, film, *then = payload
    answer = env.step_chunk(what, film=film) if command == "step" else simulator.expert.chunk(what, film=film)
    info = answer[-1]
    simulator.seen = answer[0], info["instruction"]
    info["render_s"] = env.render_seconds - rendered
    info["physics_s"] = time.process_time() - started - info["render_s"]
    ended = answer[2] or answer[3]
    if ended and then and then[0] is not None:
        return (*answer, _answer(simulator, "reset", then[0]))
    return answer
