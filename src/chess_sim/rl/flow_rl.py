"""FlowRL: a FlowPolicy's denoising chain as a stochastic policy (ReinFlow), with a critic and noise sizes.

With noise, each Euler step of the sampler (`policy.base.denoise`) is a Gaussian transition
    x_{k+1} ~ N(mu_k, sigma_k^2),   mu_k = x_k + dt_k * v(x_k, t_k),   k = 0 .. K-1   (dt_k: `time_deltas`),
so the chain x_0 .. x_K has an exact likelihood: the product of K Gaussians. Log-probs are kept per element,
(B, R, T, C): PPO clips each element's ratio on its own. Without a learned start, x_0 ~ N(0, I) is the same for every
policy and drops out of ratios: R = K. With one (`StartConfig.steer`, `policy/start.py`), the start's log-density
comes first: R = K + 1.

Spread exploration (`StartConfig.spread_noise` tau > 0): each decision draws its own log-spread u ~ N(log s, tau^2)
around the start's log-spread for its observation and starts from N(0, exp(u)^2). The spread's score is then
(u - log s) / tau^2, over a variation of tau in log-spread, where a single draw x_0 of T x A = 300 elements varies its
own norm by only ~4% (1 / sqrt(2 * 300)). u is stored with the decision as (B, 1); its log-density has its own
clipped ratio in PPO.

A policy whose chain carries padded dimensions (SmolVLA: C = 32, A = 6) gets noise on them too, and they are scored:
the padded values condition every later velocity call, so the chain's likelihood is the product over all C
dimensions, and leaving them out would drop their terms from the gradient. Only the chain's end is cut to A joints.
sigma_k is per step and chain dimension, (K, C), geometric from `sigma_start` (first step) to `sigma_end` (last);
learnable as `log_sigma` when asked. The critic is a small separate head on the prefix's pooled features
(`policy.features`) and the normalised state.

With `likelihood="flow"` (FPO, McAllister et al., 2025) the rollout runs the noise-free chain, exploring through the
start's draw alone, and the log-probs are replaced by a surrogate: minus the flow-matching errors of the executed chunk
x_K for M (noise, time) draws stored with the decision, (B, M, T, A). Their difference before and after an update
stands in for the log-likelihood ratio of the chunk; no noise size enters, so no 1 / sigma score. A learned start
then learns only through spread exploration (its x_0 density is not part of the surrogate). The prefix is computed
once per decision; PPO re-evaluates log-probs from the stored prefix, never running the encoder again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from chess_sim.config import LIKELIHOODS, NoiseConfig, StartConfig, TrainConfig
from chess_sim.policy.base import (FlowPolicy, cast_prefix, chunk_actions, denoise, flow_matching_errors, flow_times,
                                   noise_schedule, start_of, time_deltas, time_grid)
from chess_sim.policy.precision import LoweredChain
from chess_sim.policy.start import StartDistribution, SteeredPolicy, feature_size, with_spread

LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


@dataclass
class Sample:
    """One batch of decisions drawn for training: with chain noise, or noise-free under the flow surrogate."""

    chain: torch.Tensor
    """(B, K+1, T, C) the denoising chain, x_0 first; x_K is the (normalised) action chunk."""
    log_probs: torch.Tensor | None
    """(B, R, T, C) log-density of each element: R = K transitions, or with a learned start R = K + 1 (x_0 first);
    with the flow surrogate (B, M, T, A), minus the flow-matching errors of the chunk under its M draws; None for an
    unscored sample (`FlowRL.sample`'s `scored`)."""
    value: torch.Tensor
    """(B,) the critic's value of the decision's observation."""
    prefix: Any
    """The policy's prefix (batch-first tensors), for storage and re-evaluation."""
    spread: torch.Tensor | None = None
    """(B, 1) with spread exploration: the log-spread each decision drew; else None."""
    spread_log_probs: torch.Tensor | None = None
    """(B, 1) with spread exploration: the log-density of `spread`; else None."""
    flow: tuple[torch.Tensor, torch.Tensor] | None = None
    """With the flow surrogate: its draws, noise (B, M, T, C) and times (B, M); else None."""


def gaussian_log_prob(x: torch.Tensor, mean: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
    """Elementwise log N(x; mean, sigma^2)."""
    return -0.5 * ((x - mean) / sigma) ** 2 - torch.log(sigma) - LOG_SQRT_2PI


class FlowRL(nn.Module):
    """The trainable pieces of RL fine-tuning around a FlowPolicy: the policy (with its learned start when
    `start.steer`), `log_sigma`, the critic."""

    def __init__(self, policy: FlowPolicy, noise: NoiseConfig | None = None, start: StartConfig | None = None,
                 critic_width: int = 256, prefix_dtype: torch.dtype = torch.float32, likelihood: str = "chain",
                 flow_draws: int = 4):
        super().__init__()
        noise, start = noise or NoiseConfig(), start or StartConfig()
        assert likelihood in LIKELIHOODS, f"likelihood must be one of {LIKELIHOODS}, got {likelihood!r}"
        self.likelihood = likelihood
        """`chain` (ReinFlow's exact chain log-density) or `flow` (FPO's flow-matching surrogate)."""
        self.flow_draws = flow_draws
        """M, the (noise, time) draws per decision of the flow surrogate."""
        features = feature_size(policy)
        brought = isinstance(policy, SteeredPolicy)  # a policy that brings its own start keeps it (and its spread)
        self.policy = with_spread(policy, start.initial_spread, features) if start.steer and not brought else policy
        self.start: StartDistribution | None = self.policy.start if start.steer else None
        """The learned start, trained with the policy; None: the chain starts as the policy's own sampler does."""
        self.spread_noise = start.spread_noise if start.steer else 0.0
        """tau, the spread of each decision's drawn log-spread around the start's; 0: no spread exploration."""
        self.prefix_dtype = prefix_dtype
        """Stored prefixes are kept in this dtype (bfloat16 for SmolVLA's ~5.5 MiB KV caches); sampling uses
        the stored form too, so re-evaluation from storage reproduces the rollout's log-probs exactly."""
        steps, dims = policy.steps, policy.chain_dim
        log_sigma = noise_schedule(noise.sigma_start, noise.sigma_end, steps).log()[:, None].expand(steps, dims).clone()
        self.log_sigma = nn.Parameter(log_sigma, requires_grad=noise.learn_sigma)
        self.critic = nn.Sequential(nn.Linear(features + policy.action_dim, critic_width), nn.Tanh(),
                                    nn.Linear(critic_width, critic_width), nn.Tanh(), nn.Linear(critic_width, 1))

    SIGMA_BOUNDS = (1e-4, 1.0)
    """A learned noise size stays in this range (normalised action units): below it the step log-densities
    grow without bound, above it the chain is mostly noise."""

    def sigmas(self) -> torch.Tensor:
        """(K, C) noise size of every step and chain dimension."""
        return self.log_sigma.exp().clamp(*self.SIGMA_BOUNDS)

    def policy_parameter_sets(self) -> dict[str, list[nn.Parameter]]:
        """The policy's trainable parameters by role, each with its own learning rate (`RLConfig.policy_lrs`):
        `chain` (velocity and encoder) and, with a learned start, `start_spread` and `spread_head`. A start the
        policy brought along but that is not being learned stays as it is."""
        starts = [module for module in self.policy.modules() if isinstance(module, StartDistribution)]
        frozen = {id(p) for module in starts for p in module.parameters()}
        sets = {"chain": [p for p in self.policy.parameters() if p.requires_grad and id(p) not in frozen]}
        if self.start is not None:
            sets.update(start_spread=[self.start.log_std], spread_head=list(self.start.head.parameters()))
        return sets

    def scored_mask(self) -> torch.Tensor | None:
        """(R, T, 1) bool over a decision's log-prob rows (R chain rows, x_0's first with a learned start, or M flow
        draws): the elements whose score PPO counts; None when all count. A policy executing fewer actions than its
        chunk leaves out the unexecuted timesteps of what reaches the environment: the chain's last transition
        (earlier transitions shape the executed actions through the velocity network), or every draw of the flow
        surrogate, which scores the chunk itself."""
        executed, chunk = self.policy.action_steps, self.policy.chunk
        if executed == chunk:
            return None
        rows = self.flow_draws if self.likelihood == "flow" else self.start_rows + self.policy.steps
        scored = torch.ones(rows, chunk, 1, dtype=torch.bool)
        if self.likelihood == "flow":
            scored[:, executed:] = False
        else:
            scored[-1, executed:] = False
        return scored

    @property
    def explores_spread(self) -> bool:
        return self.spread_noise > 0

    @property
    def start_rows(self) -> int:
        """Leading rows of the log-probs that hold the start's density: 1 with a learned start under the chain
        likelihood, else 0."""
        return int(self.start is not None and self.likelihood == "chain")

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
        """(B,) value from the prefix features and the state (B, A) in SO-101 units."""
        features = self.policy.features(prefix).float()
        return self.critic(torch.cat([features, self.policy.normalizer.normalize_state(state.float())], -1))[:, 0]

    @torch.no_grad()
    def value_of(self, batch: dict) -> torch.Tensor:
        """(B,) value of observations, from the prefix rounded to its stored dtype as every stored decision's is
        (a bootstrap value then matches the values GAE sees elsewhere)."""
        prefix = cast_prefix(cast_prefix(self.policy.encode(batch), self.prefix_dtype), torch.float32)
        return self.value(prefix, batch["observation.state"])

    def draw_flow(self, rows: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """The flow surrogate's draws for `rows` decisions: noise (rows, M, T, C) ~ N(0, 1) and flow
        times (rows, M) ~ Beta(`TrainConfig.time_beta`, 1) at its default, the distribution this project trains
        with (a policy trained with another `--time-beta` is still scored at the default)."""
        policy, draws = self.policy, self.flow_draws
        noise = torch.randn(rows, draws, policy.chunk, policy.chain_dim, generator=generator)
        return noise, flow_times(rows * draws, TrainConfig.time_beta, generator).view(rows, draws)

    @torch.no_grad()
    def sample(self, batch: dict, x0: torch.Tensor, noise: torch.Tensor | None, spread_draw: torch.Tensor | None = None,
               flow: tuple[torch.Tensor, torch.Tensor] | None = None, start_spread: float | None = None,
               scored: bool = True, lowered: LoweredChain | None = None) -> Sample:
        """Encode `batch`, then run the chain from the standard-normal draw x0 (B, T, C) with standard-normal
        `noise` (B, K, T, C) scaled by `sigmas()`; `noise=None` runs the plain ODE (log-probs then describe a
        zero-noise chain and are not meaningful). With spread exploration, standard-normal `spread_draw` (B, 1) sets
        each decision's log-spread; None starts from the policy's own start distribution. With the flow surrogate
        the chain is noise-free whatever `noise` is, and `flow` holds its draws (`draw_flow`). `start_spread`, under
        the flow surrogate, starts the chain from `start_spread` * x0 instead of the policy's own start (the
        rollouts of `RLConfig.algorithm` `filtered`). `scored=False` leaves the log-probs out (None, and no flow
        draws kept): an update that compares no likelihoods (`filtered`) is spared the surrogate's M velocity calls
        per decision, and the chain is the same either way. `lowered` (a `policy.precision.LoweredChain`, for an
        unscored sample only) makes the chain's velocity calls in its lower precision; None: the policy's own."""
        stored = cast_prefix(self.policy.encode(batch), self.prefix_dtype)
        return self.sample_from_prefix(stored, batch["observation.state"], x0, noise, spread_draw, flow, start_spread,
                                       scored, lowered)

    @torch.no_grad()
    def sample_from_prefix(self, stored: Any, state: torch.Tensor, x0: torch.Tensor, noise: torch.Tensor | None,
                           spread_draw: torch.Tensor | None = None,
                           flow: tuple[torch.Tensor, torch.Tensor] | None = None,
                           start_spread: float | None = None, scored: bool = True,
                           lowered: LoweredChain | None = None) -> Sample:
        """`sample` from a prefix in its stored form and the state (B, A)."""
        assert lowered is None or not scored, "log-probs describe the policy's own chain: a scored sample keeps it"
        assert start_spread is None or self.likelihood == "flow", \
            "a start spread other than the policy's own needs the flow surrogate (the chain's log-probs include x_0's)"
        if self.likelihood == "flow":
            assert flow is not None or not scored, "the flow surrogate needs its draws (FlowRL.draw_flow)"
            noise = None
        prefix = cast_prefix(stored, torch.float32)
        spread = spread_log_probs = None
        if start_spread is not None:  # neither the policy's start nor its spread exploration
            start = start_spread * x0
        elif self.start is None:
            start = start_of(self.policy, prefix, x0)
        else:
            log_spread = self.policy.start_log_spread(prefix)
            if spread_draw is not None and self.explores_spread:
                assert spread_draw.shape == log_spread.shape, \
                    f"spread draws must be {tuple(log_spread.shape)}, got {tuple(spread_draw.shape)}"
                spread = log_spread + self.spread_noise * spread_draw
                spread_log_probs = self._spread_log_density(spread, log_spread)
            used = log_spread if spread is None else spread  # the head runs once per decision
            start = self.start.std_of(used)[:, :, None].to(x0) * x0
        sigmas = self.sigmas()
        runs_chain = self.policy if lowered is None else lowered
        chain, means = denoise(runs_chain, prefix, start, None if noise is None else sigmas, noise)
        if not scored:
            log_probs, flow = None, None
        elif self.likelihood == "flow":
            log_probs = self.flow_log_probs(chain, prefix, *flow)
        else:
            log_probs = self._transition_log_probs(chain, means)
            if self.start is not None:
                log_probs = torch.cat([self.start_log_probs(start, prefix, used), log_probs], dim=1)
        return Sample(chain, log_probs, self.value(prefix, state), stored, spread, spread_log_probs,
                      None if self.likelihood == "chain" else flow)

    def flow_log_probs(self, chain: torch.Tensor, prefix: Any, noise: torch.Tensor, times: torch.Tensor,
                       anchor: tuple[FlowPolicy, float] | None = None) -> torch.Tensor:
        """(B, M, T, A) the flow surrogate's elements: minus the flow-matching errors of the executed chunk (the chain's
        end, (B, K+1, T, C) given) under draws noise (B, M, T, C) and times (B, M); `anchor` as in
        `flow_matching_errors`."""
        batch, draws = times.shape
        policy = self.policy
        assert noise.shape == (batch, draws, policy.chunk, policy.chain_dim), \
            f"flow noise must be ({batch}, {draws}, {policy.chunk}, {policy.chain_dim}), got {tuple(noise.shape)}"
        actions = chain[:, -1, :, :policy.action_dim].repeat_interleave(draws, dim=0)
        errors = flow_matching_errors(policy, repeat_prefix(prefix, draws), actions, noise.flatten(0, 1),
                                      times.flatten(), anchor)
        return -errors.view(batch, draws, policy.chunk, policy.action_dim)

    def _transition_log_probs(self, chain: torch.Tensor, means: torch.Tensor) -> torch.Tensor:
        """(B, K, T, C) log N(x_{k+1}; mu_k, sigma_k^2) of every chain element."""
        return gaussian_log_prob(chain[:, 1:], means, self.sigmas()[None, :, None, :])

    def evaluate(self, chain: torch.Tensor, prefix: Any, state: torch.Tensor, spread: torch.Tensor | None = None,
                 transitions: torch.Tensor | None = None,
                 flow: tuple[torch.Tensor, torch.Tensor] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-probs (B, R, T, C) of a stored chain (B, K+1, T, C) under the current policy and noise sizes, and the
        value (B,), from a stored prefix: K velocity calls in one batch of B*K, no encoder. `spread`: the decisions'
        drawn log-spreads (B, 1), with spread exploration. `transitions` (B, K, T, C): the transitions' log-probs as
        they were, for an update that trains neither the velocity nor the noise sizes (then they cannot change, and
        only the start is re-evaluated). With the flow surrogate: its elements (B, M, T, A) under the decisions'
        stored draws `flow` (M velocity calls per decision), or `transitions` as they were."""
        prefix = cast_prefix(prefix, torch.float32)
        batch, steps = chain.shape[0], self.policy.steps
        assert chain.shape[1:] == (steps + 1, self.policy.chunk, self.policy.chain_dim), \
            f"chain must be (B, {steps + 1}, {self.policy.chunk}, {self.policy.chain_dim}), got {tuple(chain.shape)}"
        if self.likelihood == "flow":
            log_probs = transitions if transitions is not None else self.flow_log_probs(chain, prefix, *flow)
            return log_probs, self.value(prefix, state)
        if transitions is None:
            power = self.policy.time_power
            times = time_grid(steps, chain.device, power=power)[:steps]
            x = chain[:, :-1].reshape(batch * steps, *chain.shape[2:])
            velocity = self.policy.velocity(repeat_prefix(prefix, steps), x, times.repeat(batch))
            deltas = torch.tensor(time_deltas(steps, power), dtype=torch.float32, device=velocity.device)
            shape = (batch, steps, *chain.shape[2:])
            means = x.reshape(shape) + deltas[:, None, None] * velocity.reshape(shape)
            transitions = self._transition_log_probs(chain, means)
        if self.start is not None:
            transitions = torch.cat([self.start_log_probs(chain[:, 0], prefix, spread), transitions], dim=1)
        return transitions, self.value(prefix, state)

    def actions(self, chain: torch.Tensor) -> torch.Tensor:
        """(B, K+1, T, C) chain -> (B, T, A) joint targets in SO-101 units."""
        return chunk_actions(self.policy, chain[:, -1])


def repeat_prefix(prefix: Any, times: int) -> Any:
    """Each sample's prefix repeated `times` times, sample-major (matches a (B, K) -> B*K reshape)."""
    if isinstance(prefix, torch.Tensor):
        return prefix.repeat_interleave(times, dim=0)
    return {name: repeat_prefix(value, times) for name, value in prefix.items()}
