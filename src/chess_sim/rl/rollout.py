"""Training rollouts: episodes on training scenes with the exploring policy, stored for PPO.

Each round, the running episodes' observations form one batch: encode once, sample the chain (noisy under the
chain likelihood, noise-free with its surrogate's draws under the flow one), store per decision the chain, its
log-probs (or surrogate elements and draws; neither for the `filtered` algorithm, whose update compares no
likelihoods), the value, the state and the prefix (split per sample). A finished
episode goes to `Storage` with its bootstrap value: 0 after a terminal end, the critic's value of the final
observation after the time limit (see `rl/ppo.py`). Every draw comes from the run's generator, in worker order,
so a rollout is reproducible for a given number of simulators.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import torch

from chess_sim.config import RLConfig
from chess_sim.policy.base import in_blocks, observation_batch
from chess_sim.rl.flow_rl import FlowRL
from chess_sim.rl.storage import Decision, Storage, split_prefix


@dataclass
class _Episode:
    index: int
    observation: dict
    info: dict
    decisions: list[Decision] = field(default_factory=list)
    total: float = 0.0


class RolloutDriver:
    """`scheduler.Driver` for training rollouts (see the module docstring)."""

    def __init__(self, model: FlowRL, generator: torch.Generator, storage: Storage, on_done=None,
                 start_spread: float | None = None, scored: bool = True):
        self.model, self.generator, self.storage = model, generator, storage
        self.start_spread = start_spread
        """The chain starts from `start_spread` * x_0 instead of the policy's own start (`FlowRL.sample`); None:
        the policy's own."""
        self.scored = scored
        """Store each decision's log-probs (and surrogate draws); False for an update that compares no likelihoods."""
        self.rows: list[dict] = []
        self.parts = {"prep": 0.0, "sample": 0.0, "physics": 0.0, "render": 0.0, "resets": 0.0}
        """Seconds: `prep` and `sample` of the policy in this process (wall); `physics`, `render` and `resets`
        summed over the simulators (CPU seconds of their processes)."""
        self.on_done = on_done

    @classmethod
    def for_run(cls, model: FlowRL, generator: torch.Generator, storage: Storage, cfg: RLConfig, on_done=None):
        """The driver of `cfg`'s rollouts: under the `filtered` algorithm the chain starts from its `rollout_spread`
        and no log-probs are kept (its fits draw their own noise), else the policy's own start, scored."""
        filtered = cfg.algorithm == "filtered"
        return cls(model, generator, storage, on_done, cfg.filtered.rollout_spread if filtered else None,
                   scored=not filtered)

    def start(self, index: int, observation: dict, info: dict) -> _Episode:
        self.parts["resets"] += info.get("reset_s", 0.0)
        return _Episode(index, observation, info)

    def filmed(self, index: int) -> bool:
        return False

    def forget(self, episode: _Episode) -> None:
        episode.decisions.clear()

    @torch.no_grad()
    def decide(self, episodes: dict[int, _Episode]) -> dict[int, np.ndarray]:
        began = time.perf_counter()
        workers = sorted(episodes)
        running = [episodes[w] for w in workers]
        batch = observation_batch([e.observation for e in running], [e.info["instruction"] for e in running])
        policy = self.model.policy
        size = len(workers)
        x0 = torch.randn(size, policy.chunk, policy.chain_dim, generator=self.generator)
        flow = self.model.likelihood == "flow"
        noise = None if flow else torch.randn(size, policy.steps, policy.chunk, policy.chain_dim,
                                              generator=self.generator)
        spread_draw = torch.randn(size, 1, generator=self.generator) if self.model.explores_spread else None
        # drawn even when unscored, so that the run's random stream, and with it every later draw, is the same
        draws = self.model.draw_flow(size, self.generator) if flow else None
        prepared = time.perf_counter()
        # blocks of a fixed size make each decision independent of the batch
        sample = in_blocks(partial(self.model.sample, start_spread=self.start_spread, scored=self.scored), batch, x0,
                           noise, spread_draw, draws)
        chunks = self.model.actions(sample.chain)[:, :policy.action_steps].numpy()
        self.parts["prep"] += prepared - began
        self.parts["sample"] += time.perf_counter() - prepared
        prefixes = split_prefix(sample.prefix, size)
        drawn = sample.spread is not None
        for i, episode in enumerate(running):
            episode.decisions.append(Decision(sample.chain[i].clone(),
                                              None if sample.log_probs is None else sample.log_probs[i].clone(),
                                              float(sample.value[i]), batch["observation.state"][i].clone(),
                                              prefixes[i], spread=sample.spread[i].clone() if drawn else None,
                                              spread_log_prob=sample.spread_log_probs[i].clone() if drawn else None,
                                              flow=None if sample.flow is None else (draws[0][i], draws[1][i])))
        return {worker: chunks[i] for i, worker in enumerate(workers)}

    def step(self, episode: _Episode, result) -> bool:
        from chess_sim.sim.judge import episode_row

        episode.decisions[-1].reward = float(result.reward)
        self.parts["physics"] += result.info.get("physics_s", 0.0)
        self.parts["render"] += result.info.get("render_s", 0.0)
        episode.total += result.reward
        episode.observation, episode.info = result.observation, result.info
        if not (result.terminated or result.truncated):
            return False
        bootstrap = self._final_value(episode) if result.truncated else 0.0
        self.storage.add_episode(episode.decisions, bootstrap)
        row = episode_row(result.info)
        row.update({"return": episode.total, "decisions": len(episode.decisions)})
        self.rows.append(row)
        if self.on_done is not None:
            self.on_done(row)
        return True

    def _final_value(self, episode: _Episode) -> float:
        batch = observation_batch([episode.observation], [episode.info["instruction"]])
        return float(self.model.value_of(batch)[0])
