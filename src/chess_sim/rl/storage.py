"""Storage of one iteration's decisions, episode after episode (every algorithm's rollout fills one).

Per decision: the chain (K+1, T, C), its per-element log-probs (R, T, C) when the rollout kept them, the critic's
value (0 without a critic), the reward (sum over the chunk's steps), the state (A,) and the policy's prefix in its
stored form (FlowRL's `prefix_dtype`, on the CPU), so an update re-evaluates without running the encoder; with
spread exploration also the drawn log-spread (1,) and its log-density (1,).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from chess_sim.rl.gae import gae


@dataclass
class Decision:
    chain: torch.Tensor
    log_probs: torch.Tensor | None
    """None when the rollout kept none (an update that compares no likelihoods)."""
    value: float
    state: torch.Tensor
    prefix: Any
    """This decision's prefix, batch dimension 1."""
    reward: float = 0.0
    spread: torch.Tensor | None = None
    """(1,) the log-spread this decision drew (spread exploration), else None."""
    spread_log_prob: torch.Tensor | None = None
    """(1,) its log-density when drawn and scored."""


def split_prefix(prefix: Any, batch: int) -> list[Any]:
    """A batched prefix -> `batch` prefixes of batch size 1 (copies, so one sample does not pin the batch)."""
    if isinstance(prefix, torch.Tensor):
        return [prefix[i:i + 1].clone() for i in range(batch)]
    parts = {name: split_prefix(value, batch) for name, value in prefix.items()}
    return [{name: parts[name][i] for name in parts} for i in range(batch)]


def stack_prefixes(prefixes: list[Any]) -> Any:
    """Inverse of `split_prefix`."""
    if isinstance(prefixes[0], torch.Tensor):
        return torch.cat(prefixes, dim=0)
    return {name: stack_prefixes([p[name] for p in prefixes]) for name in prefixes[0]}


class Storage:
    def __init__(self):
        self.decisions: list[Decision] = []
        self._next_values: list[float] = []
        self._ends: list[bool] = []

    def __len__(self) -> int:
        return len(self.decisions)

    def add_episode(self, decisions: list[Decision], bootstrap: float) -> None:
        """An episode's decisions in order; `bootstrap` is the value after the last one (0 after a terminal
        end, the critic's value of the final observation after a time-limit end)."""
        self.decisions.extend(decisions)
        self._next_values.extend([d.value for d in decisions[1:]] + [bootstrap])
        self._ends.extend([False] * (len(decisions) - 1) + [True])

    def episodes(self) -> list[list[int]]:
        """The decision indices of each stored episode, in order."""
        out, current = [], []
        for index, end in enumerate(self._ends):
            current.append(index)
            if end:
                out.append(current)
                current = []
        return out

    def finish(self, gamma: float, lam: float) -> None:
        """Compute advantages and returns (`rl/gae.py`) from the stored values and rewards."""
        self.values = torch.tensor([d.value for d in self.decisions])
        self.rewards = torch.tensor([d.reward for d in self.decisions])
        self.advantages, self.returns = gae(self.rewards, self.values, torch.tensor(self._next_values),
                                            torch.tensor(self._ends), gamma, lam)

    def minibatch(self, index: torch.Tensor) -> tuple[torch.Tensor, Any, torch.Tensor, torch.Tensor | None]:
        """(chain (B, K+1, T, C), prefix, state (B, A), old log-probs (B, K, T, C) or None when none were kept) of
        the decisions `index`."""
        chosen = [self.decisions[i] for i in index.tolist()]
        old = None if chosen[0].log_probs is None else torch.stack([d.log_probs for d in chosen])
        return (torch.stack([d.chain for d in chosen]), stack_prefixes([d.prefix for d in chosen]),
                torch.stack([d.state for d in chosen]), old)

    def spreads(self, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
        """(drawn log-spreads (B, 1), their log-densities (B, 1)) of the decisions `index`; None without spread
        exploration."""
        chosen = [self.decisions[i] for i in index.tolist()]
        if chosen[0].spread is None:
            return None
        return torch.stack([d.spread for d in chosen]), torch.stack([d.spread_log_prob for d in chosen])
