"""Training rollouts: episodes on training scenes with the exploring policy, stored for PPO.

Each round, the running episodes' observations form one batch: encode once, sample the chain (noisy under the
chain likelihood, noise-free with its surrogate's draws under the flow one), store per decision the chain, its
log-probs (or surrogate elements and draws; neither for the `filtered` algorithm, whose update compares no
likelihoods), the value, the state and the prefix (split per sample). A finished
episode goes to `Storage` with its bootstrap value: 0 after a terminal end, the critic's value of the final
observation after the time limit (see `rl/ppo.py`). Every draw comes from the run's generator, in worker order,
so a rollout is reproducible for a given number of simulators and processes.

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

from chess_sim.config import RLConfig
from chess_sim.policy.base import concat_rows, in_blocks, observation_batch, take_rows
from chess_sim.policy.precision import LoweredChain, lowered_chain
from chess_sim.rl.flow_rl import FlowRL
from chess_sim.rl.storage import Decision, Storage, split_prefix


@dataclass
class _Episode:
    index: int
    observation: dict
    info: dict
    decisions: list[Decision] = field(default_factory=list)
    total: float = 0.0


Draws = tuple
"""One batch's random draws, batch-first: x0 (B, T, C), the chain noise (B, K, T, C) or None, the spread draws
(B, 1) or None, the flow surrogate's (noise (B, M, T, C), times (B, M)) or None."""


@dataclass
class RolloutActor:
    """The exploring policy as it decides for a batch of observations given their draws: picklable, so that the
    simulators' processes can hold a copy (`VecChessEnv.set_actor`)."""

    model: FlowRL
    start_spread: float | None
    """The chain starts from `start_spread` * x_0 instead of the policy's own start (`FlowRL.sample`); None: the
    policy's own."""
    scored: bool
    """Keep each decision's log-probs (and surrogate draws); False for an update that compares no likelihoods."""
    lowered: LoweredChain | None = None
    """The chain's velocity calls in a lower precision (`RunConfig.chain_dtype`; unscored only); None: the policy's
    own."""

    @torch.no_grad()
    def __call__(self, observations: list[dict], instructions: list[str], rows: list[Draws]) \
            -> list[tuple[np.ndarray, Decision]]:
        """Per observation, with its draws (batch dimension 1): the actions to execute (S, 6) and the decision as
        stored (its reward still 0)."""
        batch, draws = observation_batch(observations, instructions), concat_rows(rows)
        size = len(observations)
        # blocks of a fixed size make each decision independent of the batch
        sample = in_blocks(partial(self.model.sample, start_spread=self.start_spread, scored=self.scored,
                                   lowered=self.lowered), batch, *draws)
        chunks = self.model.actions(sample.chain)[:, :self.model.policy.action_steps].numpy()
        prefixes = split_prefix(sample.prefix, size)
        drawn, flow = sample.spread is not None, draws[3]
        return [(chunks[i], Decision(sample.chain[i].clone(),
                                     None if sample.log_probs is None else sample.log_probs[i].clone(),
                                     float(sample.value[i]), batch["observation.state"][i].clone(), prefixes[i],
                                     spread=sample.spread[i].clone() if drawn else None,
                                     spread_log_prob=sample.spread_log_probs[i].clone() if drawn else None,
                                     flow=None if sample.flow is None else (flow[0][i].clone(), flow[1][i].clone())))
                for i in range(size)]


class RolloutDriver:
    """`scheduler.Driver` for training rollouts (see the module docstring)."""

    def __init__(self, model: FlowRL, generator: torch.Generator, storage: Storage, on_done=None,
                 start_spread: float | None = None, scored: bool = True, in_simulators: bool = False,
                 chain_dtype: str = "float32"):
        self.model, self.generator, self.storage = model, generator, storage
        self.policy = RolloutActor(model, start_spread, scored, lowered_chain(model.policy, chain_dtype))
        self.in_simulators = in_simulators
        """Whether the policy decides in the simulators' processes (where the simulators offer it)."""
        self.rows: list[dict] = []
        self.parts = {"prep": 0.0, "sample": 0.0, "policy": 0.0, "physics": 0.0, "render": 0.0, "resets": 0.0}
        """Seconds: `prep` and `sample`, wall seconds of the policy's work in this process (drawing, deciding);
        `policy` the CPU seconds of deciding, wherever it ran; `physics`, `render` and `resets` summed over the
        simulators (CPU seconds of their processes)."""
        self.on_done = on_done

    @classmethod
    def for_run(cls, model: FlowRL, generator: torch.Generator, storage: Storage, cfg: RLConfig, on_done=None):
        """The driver of `cfg`'s rollouts: under the `filtered` algorithm the chain starts from its `rollout_spread`
        and no log-probs are kept (its fits draw their own noise), else the policy's own start, scored; the chain in
        `cfg.run.chain_dtype`, from the model's weights as they are now."""
        filtered = cfg.algorithm == "filtered"
        return cls(model, generator, storage, on_done, cfg.filtered.rollout_spread if filtered else None,
                   scored=not filtered, in_simulators=cfg.run.policy_in_simulators, chain_dtype=cfg.run.chain_dtype)

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
        policy, model = self.model.policy, self.model
        x0 = torch.randn(size, policy.chunk, policy.chain_dim, generator=self.generator)
        flow = model.likelihood == "flow"
        noise = None if flow else torch.randn(size, policy.steps, policy.chunk, policy.chain_dim,
                                              generator=self.generator)
        spread_draw = torch.randn(size, 1, generator=self.generator) if model.explores_spread else None
        # drawn even when unscored, so that the run's random stream, and with it every later draw, is the same
        return x0, noise, spread_draw, model.draw_flow(size, self.generator) if flow else None

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


def _own(value):
    """Draws with every tensor copied: a row that owns its storage is pickled alone, not with its whole batch."""
    if value is None:
        return None
    if isinstance(value, tuple):
        return tuple(_own(item) for item in value)
    return value.clone()
