"""Generalised advantage estimation over stored decisions (any algorithm with a critic).

Decisions are stored flat, episode after episode (`rl/storage.py`). One decision is one 50-step chunk; its reward is
the sum of the chunk's step rewards, and `gamma` discounts per decision. An episode cut by the time limit did not
reach a terminal state, so its last decision bootstraps from the critic's value of the final observation; only
success, irreversible failure or an unstable simulation end with a next value of 0.
"""

from __future__ import annotations

import torch


def gae(rewards: torch.Tensor, values: torch.Tensor, next_values: torch.Tensor, ends: torch.Tensor,
        gamma: float, lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Advantages and returns (N,) for N decisions stored episode after episode.

    `next_values[i]` is the value of the observation after decision i: `values[i+1]` inside an episode, the
    bootstrap value after a time-limit end, 0 after a terminal end. `ends[i]` marks an episode's last decision,
    where the recursion restarts."""
    advantages = torch.zeros_like(rewards)
    running = torch.zeros((), dtype=rewards.dtype)
    for i in range(len(rewards) - 1, -1, -1):
        delta = rewards[i] + gamma * next_values[i] - values[i]
        running = delta + gamma * lam * running * (0.0 if ends[i] else 1.0)
        advantages[i] = running
    return advantages, advantages + values


def normalized(advantages: torch.Tensor) -> torch.Tensor:
    """(N,) advantages normalised over the batch, as a policy loss uses them."""
    return (advantages - advantages.mean()) / (advantages.std(correction=0) + 1e-8)


def explained_variance(values: torch.Tensor, returns: torch.Tensor) -> float:
    """1 - Var(returns - values) / Var(returns); NaN when the returns do not vary."""
    spread = returns.var(correction=0)
    return 1.0 - float((returns - values).var(correction=0) / spread) if spread > 0 else float("nan")
