"""PPO over action chunks: GAE over each episode's decisions and the clipped update of FlowRL.

Decisions are stored flat, episode after episode (`Storage`). One decision is one 50-step chunk; its reward
is the sum of the chunk's step rewards, and `gamma` discounts per decision.

Time limits: an episode cut by the time limit (`truncated`) did not reach a terminal state, so its last
decision bootstraps from the critic's value of the final observation (partial-episode bootstrapping);
only success, irreversible failure or an unstable simulation (`terminated`) end with a next value of 0.

Ratios: the log-prob of one denoising step sums T x C elements (300 for the compact policy) and moves by hundreds
of nats after one small update, so a per-step (or per-chunk) ratio is almost always outside [1 - clip, 1 + clip]
and PPO learns nothing. As tokens in language-model PPO, every element (step x timestep x chain dimension; under
the flow surrogate draw x timestep x joint, see `rl/flow_rl.py`) has its own clipped ratio (`ratio="element"`);
`"step"` and `"chunk"` are offered for comparison. With spread exploration, each decision's
drawn log-spread adds its own clipped term, averaged on its own and added to the chain's.
A policy that executes fewer actions than its chunk (`action_steps`) leaves out the elements that never reach the
environment (`FlowRL.scored_mask`): the unexecuted timesteps of the chain's last transition (earlier ones shape
the executed actions through the velocity network) or, under the flow surrogate, of the chunk.
"""

from __future__ import annotations

import torch

from chess_sim.config import RATIOS, PPOConfig
from chess_sim.policy.average import WeightAverage
from chess_sim.rl.flow_rl import FlowRL



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


def log_ratio(new: torch.Tensor, old: torch.Tensor, mode: str, scored: torch.Tensor | None = None) -> torch.Tensor:
    """Log ratios from per-element log-probs (B, R, T, C) (chain) or (B, M, T, A) (flow surrogate): per element,
    per row (B, R) or per chunk (B,). `scored` (R, T, 1) bool, when given, keeps only those elements: per element
    (B, N) for the N scored ones, or summed over them."""
    difference = new - old
    if mode == "element":
        return difference if scored is None else difference[:, scored.expand(difference.shape[1:])]
    if scored is not None:
        difference = difference * scored
    if mode == "step":
        return difference.sum(dim=(2, 3))
    if mode == "chunk":
        return difference.sum(dim=(1, 2, 3))
    raise ValueError(f"ratio mode must be one of {RATIOS}, got {mode!r}")


LOG_RATIO_BOUND = 20.0
"""Log ratios are clamped to +-this before use (as ReinFlow's PPO does): one element far off (a tiny noise size makes
a log-density steep) would otherwise overflow exp() and inflate the KL that stops the epochs early. The clamp only
touches elements far outside the clip range; it zeroes their gradient, which the clip keeps on the pessimistic side
(negative advantage, r > 1 + clip) scaled by r, i.e. at least exp(20) times the element's score."""


def clipped_policy_loss(log_ratios: torch.Tensor, advantages: torch.Tensor, clip: float) -> dict[str, torch.Tensor]:
    """PPO's clipped surrogate with each ratio clipped on its own; `advantages` (B,) broadcast over the
    ratio's other dimensions. Also the approximate KL (mean of (r - 1) - log r), the clip fraction as CleanRL
    and ReinFlow log it (the share of ratios with |r - 1| > clip) and the effective clip fraction `clip_active`
    (the share where the clipped term is the smaller one, so the clip cuts the gradient off: only the side the
    advantage pushes towards)."""
    log_ratios = log_ratios.clamp(-LOG_RATIO_BOUND, LOG_RATIO_BOUND)
    ratio = log_ratios.exp()
    advantage = advantages.reshape(-1, *([1] * (ratio.ndim - 1)))
    unclipped, clipped = ratio * advantage, ratio.clamp(1.0 - clip, 1.0 + clip) * advantage
    surrogate = torch.min(unclipped, clipped)
    with torch.no_grad():
        clipfrac = ((ratio - 1.0).abs() > clip).float().mean()
        clip_active = (clipped < unclipped).float().mean()
    return {"pg_loss": -surrogate.mean(), "approx_kl": approx_kl(log_ratios.detach()), "clipfrac": clipfrac,
            "clip_active": clip_active}


def approx_kl(log_ratios: torch.Tensor) -> torch.Tensor:
    """Mean of (r - 1) - log r: an unbiased, non-negative estimate of KL(old || new), from log ratios clamped to
    +-`LOG_RATIO_BOUND`. Computed in float64 with expm1: in float32 the rounding of r - 1 exceeds the estimate for
    log ratios below ~1e-4 and can make it negative. Returned in the log ratios' dtype."""
    log_ratios64 = log_ratios.clamp(-LOG_RATIO_BOUND, LOG_RATIO_BOUND).double()
    return (torch.expm1(log_ratios64) - log_ratios64).mean().to(log_ratios.dtype)


def normalized_advantages(storage) -> torch.Tensor:
    """(N,) the storage's advantages normalised over the batch, as the policy loss uses them."""
    advantages = storage.advantages
    return (advantages - advantages.mean()) / (advantages.std(correction=0) + 1e-8)


def ppo_update(model: FlowRL, storage, optimizer: torch.optim.Optimizer, cfg: PPOConfig, generator: torch.Generator,
               critic_only: bool = False, chain_trains: bool = True,
               average: WeightAverage | None = None) -> dict[str, float]:
    """Epochs of minibatch updates over `storage` (see `rl/storage.py`), with `cfg`'s epochs, minibatch, clip,
    ratio, vf_coef, max_grad_norm and target_kl. With `critic_only` (critic warm-up) only the value loss is minimised
    and policy, start and noise stay exactly as they were. `chain_trains` False (neither the velocity nor the noise
    sizes learn): the transitions' log-probs stay the rollout's, so only the start is re-evaluated, without K
    velocity passes per decision. `average`, when given, follows the policy's weights after every policy step."""
    normalized = normalized_advantages(storage)
    if not cfg.push_away:
        normalized = normalized.clamp_min(0.0)
    n = len(storage)
    scored = model.scored_mask()
    stats: dict[str, list[float]] = {key: [] for key in ("pg_loss", "v_loss", "approx_kl", "clipfrac", "clip_active",
                                                         "grad_norm", "spread_kl", "spread_clipfrac")}
    epochs_done, kl_stop = 0, False
    model.train(False)  # no dropout: the log-probs must be those of the sampling policy
    for _ in range(cfg.epochs):
        epoch_kl = []
        order = torch.randperm(n, generator=generator)
        for start in range(0, n, cfg.minibatch):
            index = order[start:start + cfg.minibatch]
            chain, prefix, state, old_log_probs = storage.minibatch(index)
            spreads = storage.spreads(index)
            drawn = None if spreads is None else spreads[0]
            fixed = None if chain_trains else old_log_probs[:, model.start_rows:]
            log_probs, value = model.evaluate(chain, prefix, state, drawn, transitions=fixed,
                                              flow=storage.flow_draws(index))
            v_loss = 0.5 * ((value - storage.returns[index]) ** 2).mean()
            policy_terms = clipped_policy_loss(log_ratio(log_probs, old_log_probs, cfg.ratio, scored),
                                               normalized[index], cfg.clip)
            pg_loss = policy_terms["pg_loss"]
            if spreads is not None:
                spread_terms = clipped_policy_loss(model.spread_log_probs(drawn, prefix) - spreads[1], normalized[index],
                                                   cfg.clip)
                pg_loss = pg_loss + spread_terms["pg_loss"]
                stats["spread_kl"].append(float(spread_terms["approx_kl"]))
                stats["spread_clipfrac"].append(float(spread_terms["clipfrac"]))
            loss = cfg.vf_coef * v_loss if critic_only else pg_loss + cfg.vf_coef * v_loss
            optimizer.zero_grad()
            loss.backward()
            if critic_only:
                for parameter in trained_policy_parameters(model):
                    parameter.grad = None
            grad_norm = torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.grad is not None],
                                                       cfg.max_grad_norm)
            optimizer.step()
            if average is not None and not critic_only:
                average.update(model.policy)
            element_kl = float(approx_kl(log_ratio(log_probs.detach(), old_log_probs, "element", scored)))
            epoch_kl.append(element_kl)
            stats["pg_loss"].append(float(pg_loss.detach()))
            stats["v_loss"].append(float(v_loss.detach()))
            stats["approx_kl"].append(element_kl)
            stats["clipfrac"].append(float(policy_terms["clipfrac"]))
            stats["clip_active"].append(float(policy_terms["clip_active"]))
            stats["grad_norm"].append(float(grad_norm))
        epochs_done += 1
        if cfg.target_kl and sum(epoch_kl) / len(epoch_kl) > cfg.target_kl:
            kl_stop = True
            break
    values, returns = storage.values, storage.returns
    spread = returns.var(correction=0)
    explained = 1.0 - float((returns - values).var(correction=0) / spread) if spread > 0 else float("nan")
    out = {key: sum(v) / len(v) for key, v in stats.items() if v}
    out.update(epochs_done=epochs_done, kl_stop=kl_stop, explained_variance=explained)
    return out


def trained_policy_parameters(model: FlowRL) -> list[torch.nn.Parameter]:
    """The parameters PPO's policy term moves: the policy's trainable ones and the noise sizes when learned."""
    params = [p for p in model.policy.parameters() if p.requires_grad]
    return params + ([model.log_sigma] if model.log_sigma.requires_grad else [])
