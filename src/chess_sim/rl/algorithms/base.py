"""What the runner (`rl/runner.py`) asks of an RL algorithm, and the pieces every algorithm shares.

An algorithm is a class built as `Algorithm(policy, cfg, start_policy)` from the loaded policy, the run's `RLConfig`
(`cfg.algorithm` its own config) and a loader of the run's start policy (for an algorithm that anchors to it). It
owns the trainable model (`FlowRL`), its optimiser and the weight average, and it says:
- which training scenes an iteration rolls out (`scenes`), how its rollouts run and what they keep
  (`rollout_spec`, `draws`): chain noise or not, which start, log-probs or not, the chain's precision; the runner's
  rollout (`rl/rollout.py`) does the rest;
- `update(storage, episodes, iteration) -> stats`: one iteration's update from the rollout's `Storage` and its
  episodes' rows (`sim.judge.episode_row`, in storage order); the stats' keys are its `log_keys`;
- `check(storage) -> dict`: the self-check on the first rollout (`rl/check.py`), `passed` among its keys;
- its state for resume (`state_dict`, `load_state_dict`), saved in `rl_state.pt` beside the runner's own.
"""

from __future__ import annotations

from typing import Callable, ClassVar, Protocol

import torch

from chess_sim.config import RLConfig
from chess_sim.policy.average import WeightAverage
from chess_sim.policy.base import FlowPolicy
from chess_sim.rl.flow_rl import Draws, FlowRL, RolloutSpec
from chess_sim.rl.storage import Storage


class Algorithm(Protocol):
    log_keys: ClassVar[tuple[str, ...]]
    """The keys of `update`'s stats (an iteration's log line holds them)."""
    headline: ClassVar[tuple[tuple[str, str], ...]]
    """(key, format) of the stats shown on the terminal's line per validation."""
    model: FlowRL
    optimizer: torch.optim.Optimizer
    average: WeightAverage | None
    """The weight average the run validates and saves (`OptimConfig.ema`); None: the live weights."""

    def __init__(self, policy: FlowPolicy, cfg: RLConfig, start_policy: Callable[[], FlowPolicy]): ...

    def scenes(self, first: int, episodes: int) -> list[int]:
        """The scene indices of an iteration's `episodes` training episodes, from index `first` on (the next
        iteration starts after the last of them)."""

    def rollout_spec(self) -> RolloutSpec:
        """The next rollout's settings, from the model's weights as they are now."""

    def draws(self, size: int, generator: torch.Generator) -> Draws:
        """The random draws of `size` decisions, from `generator`."""

    def update(self, storage: Storage, episodes: list[dict], iteration: int) -> dict: ...

    def check(self, storage: Storage) -> dict: ...

    def state_dict(self) -> dict: ...

    def load_state_dict(self, state: dict) -> None: ...


def prefix_dtype(policy: FlowPolicy) -> torch.dtype:
    """The dtype decisions store their prefix in: bfloat16 for a policy with a padded chain (SmolVLA's KV caches),
    else float32."""
    return torch.float32 if policy.chain_dim == policy.action_dim else torch.bfloat16


def weight_average(model: FlowRL, cfg: RLConfig) -> WeightAverage | None:
    """The run's weight average of the policy (`OptimConfig.ema`), starting at its weights as they are now."""
    return WeightAverage(model.policy, cfg.optim.ema) if cfg.optim.ema else None


def chain_draws(policy: FlowPolicy, size: int, generator: torch.Generator, noisy: bool) -> tuple:
    """x0 (size, T, C) and, when `noisy`, the chain noise (size, K, T, C), standard normal, in that order."""
    x0 = torch.randn(size, policy.chunk, policy.chain_dim, generator=generator)
    noise = torch.randn(size, policy.steps, policy.chunk, policy.chain_dim, generator=generator) if noisy else None
    return x0, noise


def scene_groups(first: int, episodes: int, size: int = 1) -> list[int]:
    """`episodes` scene indices from `first` on, each scene `size` times in a row."""
    assert episodes % size == 0, f"{episodes} episodes do not make groups of {size}"
    return [first + i // size for i in range(episodes)]


def named_groups(state: dict, names: tuple[str, ...]) -> dict:
    """An optimiser's `state_dict` with only its parameter groups named `names` (and their parameters' state): a
    run saved with groups an algorithm no longer has resumes into the groups it has."""
    groups = [group for group in state["param_groups"] if group.get("name") in names]
    kept = {index for group in groups for index in group["params"]}
    return {"state": {index: value for index, value in state["state"].items() if index in kept},
            "param_groups": groups}
