"""Training rollouts: episodes on training scenes with the exploring policy, stored for the algorithm's update.

Each round, the running episodes' observations form one batch: encode once, sample the chain as the algorithm's
`RolloutSpec` says from the algorithm's draws (`Algorithm.draws`), store per decision the chain, its log-probs when
kept, the critic's value (0 without a critic), the state and the prefix (split per sample). A finished episode goes
to `Storage` with its bootstrap value: 0 after a terminal end, the critic's value of the final observation after the
time limit (`rl/gae.py`). Every draw comes from the run's generator, in worker order, so a rollout is reproducible
for a given number of simulators and processes.

Where the policy runs: in this process (`decide`), or, with `RunConfig.policy_in_simulators`, in the simulators'
processes (`actor`, `draws`): each holds a copy of the policy (`RolloutActor`) and decides for its own simulators
in one batch, with the draws this process made for them, and its answers carry the decisions. The same
`RolloutActor` computes both ways, in blocks of `DECISION_ROWS`, so a decision is the same wherever it is made.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import torch

from chess_sim.policy.base import concat_rows, in_blocks, observation_batch, take_rows
from chess_sim.runs import RunError
from chess_sim.rl.flow_rl import Draws, FlowRL, RolloutSpec
from chess_sim.rl.storage import Decision, Storage, split_prefix


class BrokenPolicy(RunError):
    """The policy's actions were NaN or inf (the episode ended `policy_error`): the run stops rather than learn
    from them, at its last checkpoint."""


@dataclass
class _Episode:
    index: int
    observation: dict
    info: dict
    decisions: list[Decision] = field(default_factory=list)
    total: float = 0.0


@dataclass
class RolloutActor:
    """The exploring policy as it decides for a batch of observations given their draws: picklable, so that the
    simulators' processes can hold a copy (`VecChessEnv.set_actor`)."""

    model: FlowRL
    spec: RolloutSpec

    @torch.no_grad()
    def __call__(self, observations: list[dict], instructions: list[str], rows: list[Draws]) \
            -> list[tuple[np.ndarray, Decision]]:
        """Per observation, with its draws (batch dimension 1): the actions to execute (S, 6) and the decision as
        stored (its reward still 0)."""
        batch, draws = observation_batch(observations, instructions), concat_rows(rows)
        size = len(observations)
        # blocks of a fixed size make each decision independent of the batch
        sample = in_blocks(partial(self.model.sample, spec=self.spec), batch, *draws)
        chunks = self.model.actions(sample.chain)[:, :self.model.policy.action_steps].numpy()
        prefixes = split_prefix(sample.prefix, size)
        return [(chunks[i], Decision(sample.chain[i].clone(), _row(sample.log_probs, i),
                                     0.0 if sample.value is None else float(sample.value[i]),
                                     batch["observation.state"][i].clone(), prefixes[i],
                                     spread=_row(sample.spread, i), spread_log_prob=_row(sample.spread_log_probs, i)))
                for i in range(size)]


class RolloutDriver:
    """`scheduler.Driver` for training rollouts (see the module docstring)."""

    def __init__(self, algorithm, generator: torch.Generator, storage: Storage, on_done=None,
                 in_simulators: bool = False):
        """Rollouts of `algorithm` (`rl/algorithms/base.py`: its model, `rollout_spec` as it is now, `draws`)."""
        self.model, self.generator, self.storage = algorithm.model, generator, storage
        self.policy = RolloutActor(algorithm.model, algorithm.rollout_spec())
        self._draws = algorithm.draws
        self.in_simulators = in_simulators
        """Whether the policy decides in the simulators' processes (where the simulators offer it)."""
        self.rows: list[dict] = []
        self.parts = {"prep": 0.0, "sample": 0.0, "policy": 0.0, "physics": 0.0, "render": 0.0, "resets": 0.0}
        """Seconds: `prep` and `sample`, wall seconds of the policy's work in this process (drawing, deciding);
        `policy` the CPU seconds of deciding, wherever it ran; `physics`, `render` and `resets` summed over the
        simulators (CPU seconds of their processes)."""
        self.on_done = on_done

    def start(self, index: int, observation: dict, info: dict) -> _Episode:
        self.parts["resets"] += info.get("reset_s", 0.0)
        return _Episode(index, observation, info)

    def filmed(self, index: int) -> bool:
        return False

    def forget(self, episode: _Episode) -> None:
        episode.decisions.clear()

    def actor(self) -> RolloutActor | None:
        """The policy for the simulators' processes to decide with, or None to decide here."""
        return self.policy if self.in_simulators else None

    def draws(self, episodes: dict[int, _Episode]) -> dict[int, Draws]:
        """{worker: its episode's draws, batch dimension 1} for every running episode, drawn in worker order."""
        began = time.perf_counter()
        workers = sorted(episodes)
        drawn = self._draw(len(workers))
        self.parts["prep"] += time.perf_counter() - began
        return {worker: _own(take_rows(drawn, i, i + 1)) for i, worker in enumerate(workers)}

    def _draw(self, size: int) -> Draws:
        return self._draws(size, self.generator)

    def decide(self, episodes: dict[int, _Episode]) -> dict[int, np.ndarray]:
        began, cpu = time.perf_counter(), time.process_time()
        workers = sorted(episodes)
        running = [episodes[w] for w in workers]
        drawn = self._draw(len(workers))
        rows = [take_rows(drawn, i, i + 1) for i in range(len(workers))]
        prepared = time.perf_counter()
        decided = self.policy([e.observation for e in running], [e.info["instruction"] for e in running], rows)
        self.parts["prep"] += prepared - began
        self.parts["sample"] += time.perf_counter() - prepared
        self.parts["policy"] += time.process_time() - cpu
        for episode, (_, decision) in zip(running, decided):
            episode.decisions.append(decision)
        return {worker: chunk for worker, (chunk, _) in zip(workers, decided)}

    def step(self, episode: _Episode, result) -> bool:
        from chess_sim.sim.judge import episode_row

        if "decision" in result.info:  # decided in the simulator's process
            episode.decisions.append(result.info.pop("decision"))
            self.parts["policy"] += result.info["policy_s"]
        episode.decisions[-1].reward = float(result.reward)
        self.parts["physics"] += result.info.get("physics_s", 0.0)
        self.parts["render"] += result.info.get("render_s", 0.0)
        episode.total += result.reward
        episode.observation, episode.info = result.observation, result.info
        if not (result.terminated or result.truncated):
            return False
        if result.info["end"] == "policy_error":
            raise BrokenPolicy(f"training scene {result.info['index']} (seed {result.info['seed']}), decision "
                               f"{len(episode.decisions)}: the policy's actions are NaN or inf; the run stops at "
                               "its last checkpoint")
        bootstrap = self._final_value(episode) if result.truncated else 0.0
        self.storage.add_episode(episode.decisions, bootstrap)
        row = episode_row(result.info)
        row.update({"return": episode.total, "decisions": len(episode.decisions)})
        self.rows.append(row)
        if self.on_done is not None:
            self.on_done(row)
        return True

    def _final_value(self, episode: _Episode) -> float:
        if self.model.critic is None:
            return 0.0
        batch = observation_batch([episode.observation], [episode.info["instruction"]])
        return float(self.model.value_of(batch)[0])


def _own(value):
    """Draws with every tensor copied: a row that owns its storage is pickled alone, not with its whole batch."""
    if value is None:
        return None
    if isinstance(value, tuple):
        return tuple(_own(item) for item in value)
    return value.clone()


def _row(value: torch.Tensor | None, index: int) -> torch.Tensor | None:
    return None if value is None else value[index].clone()
