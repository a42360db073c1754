"""FlowRL: a FlowPolicy's denoising chain as a stochastic policy (ReinFlow), with its start and, for an algorithm
that needs one, a critic. Every RL algorithm samples its rollouts through it (`rl/rollout.py`).

With noise sizes sigma (K, C), each Euler step of the sampler (`policy.base.denoise`) is a Gaussian transition
    x_{k+1} ~ N(mu_k, sigma_k^2),   mu_k = x_k + dt_k * v(x_k, t_k),   k = 0 .. K-1   (dt_k: `time_deltas`),
so the chain x_0 .. x_K has an exact likelihood: the product of K Gaussians. Log-probs are kept per element,
(B, R, T, C). Without a learned start, x_0 ~ N(0, I) is the same for every policy and drops out of ratios: R = K.
With one (`StartConfig.steer`, `policy/start.py`), the start's log-density comes first: R = K + 1.

Spread exploration (tau = `spread_noise` > 0): each decision draws its own log-spread u ~ N(log s, tau^2) around the
start's log-spread for its observation and starts from N(0, exp(u)^2); u is stored with the decision as (B, 1), with
its log-density.

A chain with padded dimensions (SmolVLA: C = 32, A = 6) gets noise on them too, and they are scored: the padded
values condition every later velocity call. Only the chain's end is cut to A joints. The critic is a small separate
head on the prefix's pooled features (`policy.features`) and the normalised state. The prefix is computed once per
decision; updates re-evaluate from the stored prefix, never running the encoder again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from chess_sim.config import StartConfig
from chess_sim.policy.base import (FlowPolicy, cast_prefix, chunk_actions, denoise, start_of, time_deltas,
                                   time_grid)
from chess_sim.policy.precision import LoweredChain
from chess_sim.policy.start import StartDistribution, SteeredPolicy, feature_size, with_spread

LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)

Draws = tuple
"""One batch's random draws, batch-first: x0 (B, T, C) standard normal; the chain noise (B, K, T, C) standard normal,
or None for the noise-free chain; the spread draws (B, 1), or None without spread exploration."""


@dataclass(frozen=True)
class RolloutSpec:
    """What an algorithm's training rollouts run and keep (`Algorithm.rollout`)."""

    sigmas: torch.Tensor | None = None
    """(K, C) noise sizes of the chain's steps; None: the noise-free chain."""
    start_spread: float | None = None
    """The chain starts from `start_spread` * x0 instead of the policy's own start; None: the policy's own."""
    scored: bool = False
    """Keep each decision's log-probs (and the drawn spreads' log-densities)."""
    lowered: LoweredChain | None = None
    """The chain's velocity calls in a lower precision (unscored rollouts only); None: the policy's own."""

    def __post_init__(self):
        assert self.lowered is None or not self.scored, "log-probs describe the policy's own chain"
        assert self.start_spread is None or not self.scored, \
            "a start other than the policy's own is not what the log-probs describe"


@dataclass
class Sample:
    """One batch of decisions drawn for training."""

    chain: torch.Tensor
    """(B, K+1, T, C) the denoising chain, x_0 first; x_K is the (normalised) action chunk."""
    log_probs: torch.Tensor | None
    """(B, R, T, C) log-density of each element (R = K, or K + 1 with a learned start, x_0 first); None unscored."""
    value: torch.Tensor | None
    """(B,) the critic's value of the decision's observation; None without a critic."""
    prefix: Any
    """The policy's prefix in its stored form (batch-first tensors), for storage and re-evaluation."""
    spread: torch.Tensor | None = None
    """(B, 1) with spread exploration: the log-spread each decision drew; else None."""
    spread_log_probs: torch.Tensor | None = None
    """(B, 1) with spread exploration and scored: the log-density of `spread`; else None."""


def gaussian_log_prob(x: torch.Tensor, mean: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
    """Elementwise log N(x; mean, sigma^2)."""
    return -0.5 * ((x - mean) / sigma) ** 2 - torch.log(sigma) - LOG_SQRT_2PI


class FlowRL(nn.Module):
    """The trainable pieces of RL fine-tuning around a FlowPolicy: the policy (with its learned start when
    `start.steer`) and, with `critic_width` > 0, the critic."""

    def __init__(self, policy: FlowPolicy, start: StartConfig | None = None, spread_noise: float = 0.0,
                 critic_width: int = 0, prefix_dtype: torch.dtype = torch.float32):
        super().__init__()
        start = start or StartConfig()
        features = feature_size(policy)
        brought = isinstance(policy, SteeredPolicy)  # a policy that brings its own start keeps it (and its spread)
        self.policy = with_spread(policy, start.initial_spread, features) if start.steer and not brought else policy
        self.start: StartDistribution | None = self.policy.start if start.steer else None
        """The learned start, trained with the policy; None: the chain starts as the policy's own sampler does."""
        assert spread_noise == 0 or self.start is not None, "spread exploration needs a learned start"
        self.spread_noise = spread_noise
        """tau, the spread of each decision's drawn log-spread around the start's; 0: no spread exploration."""
        self.prefix_dtype = prefix_dtype
        """Stored prefixes are kept in this dtype (bfloat16 for SmolVLA's KV caches); sampling uses the stored form
        too, so re-evaluation from storage reproduces the rollout's log-probs exactly."""
        self.critic = None if critic_width == 0 else nn.Sequential(
            nn.Linear(features + policy.action_dim, critic_width), nn.Tanh(),
            nn.Linear(critic_width, critic_width), nn.Tanh(), nn.Linear(critic_width, 1))

    def policy_parameter_sets(self) -> dict[str, list[nn.Parameter]]:
        """The policy's trainable parameters by role: `chain` (velocity and encoder) and, with a learned start,
        `start_spread` and `spread_head`. A start the policy brought along but that is not being learned stays as
        it is."""
        starts = [module for module in self.policy.modules() if isinstance(module, StartDistribution)]
        frozen = {id(p) for module in starts for p in module.parameters()}
        sets = {"chain": [p for p in self.policy.parameters() if p.requires_grad and id(p) not in frozen]}
        if self.start is not None:
            sets.update(start_spread=[self.start.log_std], spread_head=list(self.start.head.parameters()))
        return sets

    @property
    def start_rows(self) -> int:
        """Leading rows of the log-probs that hold the start's density: 1 with a learned start, else 0."""
        return int(self.start is not None)

    def scored_mask(self) -> torch.Tensor | None:
        """(R, T, 1) bool over a decision's log-prob rows: the elements an update counts; None when all count. A
        policy executing fewer actions than its chunk leaves out the unexecuted timesteps of the chain's last
        transition (earlier transitions shape the executed actions through the velocity network)."""
        executed, chunk = self.policy.action_steps, self.policy.chunk
        if executed == chunk:
            return None
        scored = torch.ones(self.start_rows + self.policy.steps, chunk, 1, dtype=torch.bool)
        scored[-1, executed:] = False
        return scored

    def start_log_probs(self, start: torch.Tensor, prefix: Any, spread: torch.Tensor | None = None) -> torch.Tensor:
        """(B, 1, T, C) log-density of a chain's start (B, T, C) under the learned start distribution, with the
        decisions' drawn log-spreads `spread` (B, 1) in place of the policy's when given."""
        log_spread = self.policy.start_log_spread(prefix) if spread is None else spread
        std = self.start.std_of(log_spread)[:, :, None]
        return gaussian_log_prob(start, torch.zeros_like(start), std.expand_as(start))[:, None]

    def spread_log_probs(self, spread: torch.Tensor, prefix: Any) -> torch.Tensor:
        """(B, 1) log-density of drawn log-spreads under N(the start's log-spread for `prefix`, tau^2)."""
        return self._spread_log_density(spread, self.policy.start_log_spread(cast_prefix(prefix, torch.float32)))

    def _spread_log_density(self, spread: torch.Tensor, centre: torch.Tensor) -> torch.Tensor:
        return gaussian_log_prob(spread, centre, self.spread_noise * torch.ones_like(spread))

    def value(self, prefix: Any, state: torch.Tensor) -> torch.Tensor:
        """(B,) the critic's value from the prefix features and the state (B, A) in SO-101 units."""
        features = self.policy.features(prefix).float()
        return self.critic(torch.cat([features, self.policy.normalizer.normalize_state(state.float())], -1))[:, 0]

    @torch.no_grad()
    def value_of(self, batch: dict) -> torch.Tensor:
        """(B,) value of observations, from the prefix rounded to its stored dtype as every stored decision's is
        (a bootstrap value then matches the values GAE sees elsewhere)."""
        prefix = cast_prefix(cast_prefix(self.policy.encode(batch), self.prefix_dtype), torch.float32)
        return self.value(prefix, batch["observation.state"])

    @torch.no_grad()
    def sample(self, batch: dict, x0: torch.Tensor, noise: torch.Tensor | None, spread_draw: torch.Tensor | None,
               spec: RolloutSpec) -> Sample:
        """Encode `batch`, then run the chain as `spec` says from the draws (`Draws`): the chain noise (B, K, T, C)
        is scaled by `spec.sigmas` (ignored for the noise-free chain); with spread exploration the spread draws
        (B, 1) set each decision's log-spread."""
        stored = cast_prefix(self.policy.encode(batch), self.prefix_dtype)
        return self.sample_from_prefix(stored, batch["observation.state"], x0, noise, spread_draw, spec)

    @torch.no_grad()
    def sample_from_prefix(self, stored: Any, state: torch.Tensor, x0: torch.Tensor, noise: torch.Tensor | None,
                           spread_draw: torch.Tensor | None, spec: RolloutSpec) -> Sample:
        """`sample` from a prefix in its stored form and the state (B, A)."""
        prefix = cast_prefix(stored, torch.float32)
        spread = spread_log_probs = used = None
        if spec.start_spread is not None:  # neither the policy's start nor its spread exploration
            start = spec.start_spread * x0
        elif self.start is None:
            start = start_of(self.policy, prefix, x0)
        else:
            log_spread = self.policy.start_log_spread(prefix)
            if spread_draw is not None and self.spread_noise > 0:
                assert spread_draw.shape == log_spread.shape, \
                    f"spread draws must be {tuple(log_spread.shape)}, got {tuple(spread_draw.shape)}"
                spread = log_spread + self.spread_noise * spread_draw
                spread_log_probs = self._spread_log_density(spread, log_spread)
            used = log_spread if spread is None else spread  # the head runs once per decision
            start = self.start.std_of(used)[:, :, None].to(x0) * x0
        noisy = spec.sigmas is not None
        runs_chain = self.policy if spec.lowered is None else spec.lowered
        chain, means = denoise(runs_chain, prefix, start, spec.sigmas if noisy else None, noise if noisy else None)
        log_probs = None
        if spec.scored:
            log_probs = self.transition_log_probs(chain, means, spec.sigmas)
            if self.start is not None:
                log_probs = torch.cat([self.start_log_probs(start, prefix, used), log_probs], dim=1)
        value = None if self.critic is None else self.value(prefix, state)
        return Sample(chain, log_probs, value, stored, spread, spread_log_probs if spec.scored else None)

    @staticmethod
    def transition_log_probs(chain: torch.Tensor, means: torch.Tensor, sigmas: torch.Tensor) -> torch.Tensor:
        """(B, K, T, C) log N(x_{k+1}; mu_k, sigma_k^2) of every chain element; sigmas (K, C)."""
        return gaussian_log_prob(chain[:, 1:], means, sigmas[None, :, None, :])

    def evaluate(self, chain: torch.Tensor, prefix: Any, sigmas: torch.Tensor, spread: torch.Tensor | None = None,
                 transitions: torch.Tensor | None = None) -> torch.Tensor:
        """Log-probs (B, R, T, C) of a stored chain (B, K+1, T, C) under the current policy and noise sizes sigmas
        (K, C), from a stored prefix: K velocity calls in one batch of B*K, no encoder. `spread`: the decisions'
        drawn log-spreads (B, 1), with spread exploration. `transitions` (B, K, T, C): the transitions' log-probs
        as they were, for an update that does not train the velocity (then only the start is re-evaluated)."""
        prefix = cast_prefix(prefix, torch.float32)
        batch, steps = chain.shape[0], self.policy.steps
        assert chain.shape[1:] == (steps + 1, self.policy.chunk, self.policy.chain_dim), \
            f"chain must be (B, {steps + 1}, {self.policy.chunk}, {self.policy.chain_dim}), got {tuple(chain.shape)}"
        if transitions is None:
            power = self.policy.time_power
            times = time_grid(steps, chain.device, power=power)[:steps]
            x = chain[:, :-1].reshape(batch * steps, *chain.shape[2:])
            velocity = self.policy.velocity(repeat_prefix(prefix, steps), x, times.repeat(batch))
            deltas = torch.tensor(time_deltas(steps, power), dtype=torch.float32, device=velocity.device)
            shape = (batch, steps, *chain.shape[2:])
            means = x.reshape(shape) + deltas[:, None, None] * velocity.reshape(shape)
            transitions = self.transition_log_probs(chain, means, sigmas)
        if self.start is not None:
            transitions = torch.cat([self.start_log_probs(chain[:, 0], prefix, spread), transitions], dim=1)
        return transitions

    def actions(self, chain: torch.Tensor) -> torch.Tensor:
        """(B, K+1, T, C) chain -> (B, T, A) joint targets in SO-101 units."""
        return chunk_actions(self.policy, chain[:, -1])


def repeat_prefix(prefix: Any, times: int) -> Any:
    """Each sample's prefix repeated `times` times, sample-major (matches a (B, K) -> B*K reshape)."""
    if isinstance(prefix, torch.Tensor):
        return prefix.repeat_interleave(times, dim=0)
    return {name: repeat_prefix(value, times) for name, value in prefix.items()}
