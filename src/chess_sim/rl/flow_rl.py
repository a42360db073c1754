"""FlowRL: a FlowPolicy's denoising chain as a stochastic policy (ReinFlow), with a critic and noise sizes.

With noise, each Euler step of the sampler is a Gaussian transition
    x_{k+1} ~ N(mu_k, sigma_k^2),   mu_k = x_k + dt * v(x_k, t_k),   k = 0 .. K-1,
so the chain x_0 .. x_K has an exact likelihood: the product of K Gaussians (x_0 ~ N(0, I) is the same for
every policy and drops out of ratios). Log-probs are kept per element, (B, K, T, A): PPO clips each element's
ratio on its own. With `steer`, the start is learned as well, x_0 ~ N(mean(prefix), diag(std^2)) from a head and
a per-joint spread of the policy (`CompactPolicy.with_steering`), and its log-densities come first: (B, K+1, T, A).
With spread exploration (`spread_noise` tau > 0), each decision also draws its own log-spread, u ~ N(log std, tau^2)
per spread (S = 1 shared or A per joint), and starts from N(mean, diag(exp(u)^2)). The spread's score is then
(u - log std) / tau^2, over a variation of tau in log-spread, where a single draw x_0 of T x A = 300 elements
varies its own norm by only ~4% (1 / sqrt(2 * 300)): the learned spread gets a signal about tau / 0.04 times as
strong per decision. u is stored with the decision; its log-density (B, S) has its own clipped ratio in PPO.
Only the A real action dimensions count; a policy whose chain carries padded dimensions
(SmolVLA: C = 32) gets noise on them too, and they act as part of the conditioning.

sigma_k is per step and chain dimension, (K, C), on a geometric schedule from `sigma_start` (first step) to
`sigma_end` (last); learnable as `log_sigma` when asked. The critic is a small separate head on the prefix's
pooled features (`policy.features`) and the normalised state. The prefix is computed once per decision; PPO
re-evaluates log-probs from the stored prefix, never running the encoder again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from chess_sim.policy.base import FlowPolicy, chunk_actions, noise_schedule, time_grid

LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


@dataclass
class Sample:
    """One batch of decisions drawn with noise."""

    chain: torch.Tensor
    """(B, K+1, T, C) the denoising chain, x_0 first; x_K is the (normalised) action chunk."""
    log_probs: torch.Tensor
    """(B, R, T, A) log-density of each element: R = K transitions, or with steering R = K + 1 (x_0 first)."""
    value: torch.Tensor
    """(B,) the critic's value of the decision's observation."""
    prefix: Any
    """The policy's prefix (batch-first tensors), for storage and re-evaluation."""
    spread: torch.Tensor | None = None
    """(B, S) with spread exploration: the log-spread each decision drew; else None."""
    spread_log_probs: torch.Tensor | None = None
    """(B, S) with spread exploration: the log-density of `spread`; else None."""


def gaussian_log_prob(x: torch.Tensor, mean: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
    """Elementwise log N(x; mean, sigma^2)."""
    return -0.5 * ((x - mean) / sigma) ** 2 - torch.log(sigma) - LOG_SQRT_2PI


class FlowRL(nn.Module):
    """The trainable pieces of RL fine-tuning around a FlowPolicy: the policy, `log_sigma`, the critic."""

    def __init__(self, policy: FlowPolicy, sigma_start: float = 0.2, sigma_end: float = 0.002,
                 learn_sigma: bool = False, critic_width: int = 256, prefix_dtype: torch.dtype = torch.float32,
                 steer: bool = False, spread: str = "joint", spread_noise: float = 0.0):
        super().__init__()
        if steer:
            if not hasattr(policy, "with_steering"):
                raise ValueError(f"steering needs a compact policy; {type(policy).__name__} has no steering head")
            policy = policy.with_steering(spread)
        if spread_noise < 0 or (spread_noise > 0 and not steer):
            raise ValueError(f"spread exploration needs steering and a noise size >= 0, got {spread_noise}")
        self.steer = steer
        self.spread_noise = spread_noise
        """tau, the spread of each decision's drawn log-spread around the learned one; 0: no spread exploration."""
        self.policy = policy
        self.prefix_dtype = prefix_dtype
        """Stored prefixes are kept in this dtype (bfloat16 for SmolVLA's ~5.5 MiB KV caches); sampling uses
        the stored form too, so re-evaluation from storage reproduces the rollout's log-probs exactly."""
        steps, dims = policy.steps, policy.chain_dim
        log_sigma = noise_schedule(sigma_start, sigma_end, steps).log()[:, None].expand(steps, dims).clone()
        self.log_sigma = nn.Parameter(log_sigma, requires_grad=learn_sigma)
        features = policy.features(_probe_prefix(policy)).shape[-1]
        self.critic = nn.Sequential(nn.Linear(features + policy.action_dim, critic_width), nn.Tanh(),
                                    nn.Linear(critic_width, critic_width), nn.Tanh(), nn.Linear(critic_width, 1))

    SIGMA_BOUNDS = (1e-4, 1.0)
    """A learned noise size stays in this range (normalised action units): below it the step log-densities
    grow without bound, above it the chain is mostly noise."""

    def sigmas(self) -> torch.Tensor:
        """(K, C) noise size of every step and chain dimension."""
        return self.log_sigma.exp().clamp(*self.SIGMA_BOUNDS)

    def policy_parameter_sets(self) -> dict[str, list[nn.Parameter]]:
        """The policy's trainable parameters by role: `chain` (velocity and encoder) and, when steered,
        `start_mean` (the head), `start_spread` and, with a `scene` spread, `spread_head`; each has its own learning
        rate (`RLConfig.policy_lrs`)."""
        if not self.steer:
            return {"chain": [p for p in self.policy.parameters() if p.requires_grad]}
        head = list(self.policy.steer.parameters())
        spread_head = [] if self.policy.spread_head is None else list(self.policy.spread_head.parameters())
        start = [*head, self.policy.start_log_std, *spread_head]
        chain = [p for p in self.policy.parameters() if p.requires_grad and all(p is not q for q in start)]
        sets = {"chain": chain, "start_mean": head, "start_spread": [self.policy.start_log_std]}
        return {**sets, "spread_head": spread_head} if spread_head else sets

    def row_sigmas(self) -> torch.Tensor:
        """(R,) mean noise size over the real joints of each log-prob row, for `ppo.scored_steps`. A steered start
        counts as infinite, so it always scores: its spread is bounded below, so its score cannot blow up."""
        steps = self.sigmas().detach()[:, :self.policy.action_dim].mean(dim=1)
        return torch.cat([steps.new_full((1,), math.inf), steps]) if self.steer else steps

    def start_log_probs(self, start: torch.Tensor, prefix: Any, spread: torch.Tensor | None = None) -> torch.Tensor:
        """(B, 1, T, A) log-density of a steered chain's start (B, T, C) under the policy's start distribution,
        with the decisions' drawn log-spreads `spread` (B, S) in place of the learned spread when given."""
        mean, std = self.policy.start_distribution(prefix)
        return self._start_log_density(start, mean, self._drawn_std(std, spread))[:, None]

    def _drawn_std(self, std: torch.Tensor, spread: torch.Tensor | None) -> torch.Tensor:
        """The learned start spread (A,), or with drawn log-spreads (B, S) each decision's own (B, 1, A)."""
        return std if spread is None else self.policy.start_std_of(spread)[:, None]

    @property
    def explores_spread(self) -> bool:
        return self.spread_noise > 0

    def spread_log_probs(self, spread: torch.Tensor, prefix: Any) -> torch.Tensor:
        """(B, S) log-density of drawn log-spreads under N(the policy's log-spread for `prefix`, tau^2)."""
        return self._spread_log_density(spread, self.policy.start_log_spread(cast_prefix(prefix, torch.float32)))

    def _spread_log_density(self, spread: torch.Tensor, centre: torch.Tensor) -> torch.Tensor:
        """(B, S) log N(spread; centre, tau^2)."""
        return gaussian_log_prob(spread, centre, self.spread_noise * torch.ones_like(spread))

    def _start_log_density(self, start: torch.Tensor, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
        """(B, T, A) log N(start; mean, std^2) over the real joints."""
        return gaussian_log_prob(start, mean, std.expand_as(mean))[..., :self.policy.action_dim]

    def value(self, prefix: Any, state: torch.Tensor) -> torch.Tensor:
        """(B,) value from the prefix features and the state (B, A) in SO-101 units."""
        features = self.policy.features(prefix).float()
        return self.critic(torch.cat([features, self.policy.normalizer.normalize_state(state.float())], -1))[:, 0]

    @torch.no_grad()
    def value_of(self, batch: dict) -> torch.Tensor:
        """(B,) value of observations, from the prefix rounded to its stored dtype as every stored decision's is
        (a bootstrap value then matches the values GAE sees elsewhere)."""
        prefix = cast_prefix(cast_prefix(self.policy.encode(batch), self.prefix_dtype), torch.float32)
        return self.value(prefix, batch["observation.state"])

    @torch.no_grad()
    def sample(self, batch: dict, x0: torch.Tensor, noise: torch.Tensor | None,
               spread_draw: torch.Tensor | None = None) -> Sample:
        """Encode `batch`, then run the chain from x0 (B, T, C) with standard-normal `noise` (B, K, T, C)
        scaled by `sigmas()`; `noise=None` runs the plain ODE (log-probs then describe a zero-noise chain and
        are not meaningful). With spread exploration, standard-normal `spread_draw` (B, S) set each decision's
        log-spread; None starts from the learned spread, as the policy's own sampler does."""
        stored = cast_prefix(self.policy.encode(batch), self.prefix_dtype)
        return self.sample_from_prefix(stored, batch["observation.state"], x0, noise, spread_draw)

    @torch.no_grad()
    def sample_from_prefix(self, stored: Any, state: torch.Tensor, x0: torch.Tensor,
                           noise: torch.Tensor | None, spread_draw: torch.Tensor | None = None) -> Sample:
        """`sample` from a prefix in its stored form and the state (B, A)."""
        prefix = cast_prefix(stored, torch.float32)
        steps = self.policy.steps
        times, dt = time_grid(steps, x0.device), -1.0 / steps
        sigmas = self.sigmas()
        start_mean, start_std = self.policy.start_distribution(prefix)
        spread = spread_log_probs = None
        if spread_draw is not None and self.explores_spread:
            assert spread_draw.shape[1:] == self.policy.start_log_std.shape, \
                f"spread draws must be (B, {self.policy.start_log_std.shape[0]}), got {tuple(spread_draw.shape)}"
            centre = self.policy.start_log_spread(prefix)
            spread = centre + self.spread_noise * spread_draw
            spread_log_probs = self._spread_log_density(spread, centre)
            start_std = self._drawn_std(start_std, spread)
        chain = [start_mean + start_std * x0]
        log_probs = [self._start_log_density(chain[0], start_mean, start_std)] if self.steer else []
        for k in range(steps):
            x = chain[-1]
            mean = x + dt * self.policy.velocity(prefix, x, times[k].expand(x.shape[0]))
            nxt = mean if noise is None else mean + sigmas[k] * noise[:, k]
            log_probs.append(gaussian_log_prob(nxt, mean, sigmas[k])[..., :self.policy.action_dim])
            chain.append(nxt)
        return Sample(torch.stack(chain, 1), torch.stack(log_probs, 1), self.value(prefix, state), stored, spread,
                      spread_log_probs)

    def evaluate(self, chain: torch.Tensor, prefix: Any, state: torch.Tensor,
                 spread: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-probs (B, R, T, A) of a stored chain (B, K+1, T, C) under the current policy and noise sizes,
        and the value (B,), from a stored prefix: K velocity calls in one batch of B*K, no encoder. `spread`:
        the decisions' drawn log-spreads (B, S), with spread exploration."""
        prefix = cast_prefix(prefix, torch.float32)
        batch, steps = chain.shape[0], self.policy.steps
        assert chain.shape[1:] == (steps + 1, self.policy.chunk, self.policy.chain_dim), \
            f"chain must be (B, {steps + 1}, {self.policy.chunk}, {self.policy.chain_dim}), got {tuple(chain.shape)}"
        times = time_grid(steps, chain.device)[:steps]
        x = chain[:, :-1].reshape(batch * steps, *chain.shape[2:])
        repeated = _repeat_prefix(prefix, steps)
        velocity = self.policy.velocity(repeated, x, times.repeat(batch))
        mean = (x + (-1.0 / steps) * velocity).reshape(batch, steps, *chain.shape[2:])
        sigmas = self.sigmas()[None, :, None, :]
        log_probs = gaussian_log_prob(chain[:, 1:], mean, sigmas)[..., :self.policy.action_dim]
        if self.steer:
            log_probs = torch.cat([self.start_log_probs(chain[:, 0], prefix, spread), log_probs], dim=1)
        return log_probs, self.value(prefix, state)

    def evaluate_start(self, chain: torch.Tensor, prefix: Any, state: torch.Tensor,
                       spread: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """`evaluate` of a steered chain's start alone: log-probs (B, 1, T, A) and the value (B,); for updates that
        leave the velocity and the noise sizes as they are, where the transitions' log-probs cannot change."""
        assert self.steer, "only a steered chain has a start to evaluate"
        prefix = cast_prefix(prefix, torch.float32)
        return self.start_log_probs(chain[:, 0], prefix, spread), self.value(prefix, state)

    def actions(self, chain: torch.Tensor) -> torch.Tensor:
        """(B, K+1, T, C) chain -> (B, T, A) joint targets in SO-101 units."""
        return chunk_actions(self.policy, chain[:, -1])


def cast_prefix(prefix: Any, dtype: torch.dtype) -> Any:
    """The prefix with its floating-point tensors in `dtype` (masks and indices untouched)."""
    if isinstance(prefix, torch.Tensor):
        return prefix.to(dtype) if prefix.is_floating_point() else prefix
    return {name: cast_prefix(value, dtype) for name, value in prefix.items()}


def _repeat_prefix(prefix: Any, times: int) -> Any:
    """Each sample's prefix repeated `times` times, sample-major (matches a (B, K) -> B*K reshape)."""
    if isinstance(prefix, torch.Tensor):
        return prefix.repeat_interleave(times, dim=0)
    return {name: _repeat_prefix(value, times) for name, value in prefix.items()}


def _probe_prefix(policy: FlowPolicy) -> Any:
    """A prefix of one blank observation, to size the critic's input."""
    size = 64
    blank = torch.zeros(1, 3, size, size)
    batch = {"observation.images.front": blank, "observation.images.wrist": blank,
             "observation.state": torch.zeros(1, policy.action_dim), "task": ["Move the white pawn from e2 to e4."]}
    with torch.no_grad():
        return policy.encode(batch)
