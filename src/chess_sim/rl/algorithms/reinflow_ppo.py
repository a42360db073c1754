"""ReinFlow PPO (`--algorithm ppo`, `PPOConfig`), the seed's method: PPO over 50-step chunks whose exploration is
Gaussian noise in every denoising step.

Rollout: the chain with noise sizes sigma (K, C), geometric from `sigma_start` (first step) to `sigma_end` (last),
from the policy's start (with spread exploration, each decision's own drawn spread); every decision keeps its
per-element log-probs (B, R, T, C) (`rl/flow_rl.py`) and the critic's value. Update: GAE over each episode's
decisions (`rl/gae.py`), then `epochs` passes of minibatch steps of the per-element clipped surrogate
(`rl/clipped_loss.py`) plus `vf_coef` times the value loss, stopping early once an epoch's mean approximate KL
exceeds `target_kl`. The first `critic_warmup` iterations train the critic alone. A policy that executes fewer
actions than its chunk leaves out the elements that never reach the environment (`FlowRL.scored_mask`).
"""

from __future__ import annotations

from typing import Callable

import torch

from chess_sim.config import RLConfig
from chess_sim.policy.base import FlowPolicy, cast_prefix, noise_schedule
from chess_sim.rl.algorithms.base import chain_draws, prefix_dtype, scene_groups, weight_average
from chess_sim.rl.check import self_check
from chess_sim.rl.clipped_loss import approx_kl, clipped_policy_loss, element_log_ratios
from chess_sim.rl.flow_rl import Draws, FlowRL, RolloutSpec
from chess_sim.rl.gae import explained_variance, normalized
from chess_sim.rl.storage import Storage

CRITIC_WIDTH = 256
"""Hidden width of the critic's two layers."""


class ReinFlowPPO:
    log_keys = ("kl", "clipfrac", "clip_active", "pg_loss", "v_loss", "grad_norm", "explained_variance",
                "epochs_done", "kl_stop", "spread_kl", "spread_clipfrac", "sigma_mean")
    headline = (("kl", "kl {:.2g}"),)

    def __init__(self, policy: FlowPolicy, cfg: RLConfig, start_policy: Callable[[], FlowPolicy] | None = None):
        self.cfg = ppo = cfg.algorithm
        if ppo.spread_noise and not cfg.start.steer:
            raise ValueError(f"spread_noise {ppo.spread_noise} needs a learned start (steer)")
        self.model = FlowRL(policy, cfg.start, ppo.spread_noise if cfg.start.steer else 0.0, CRITIC_WIDTH,
                            prefix_dtype(policy)).eval()
        steps, dims = policy.steps, policy.chain_dim
        self.sigmas = noise_schedule(ppo.sigma_start, ppo.sigma_end, steps)[:, None].expand(steps, dims).clone()
        """(K, C) the chain's noise sizes, per step and chain dimension."""
        self.lrs = {"chain": ppo.lr, "start_spread": ppo.spread_lr, "spread_head": ppo.spread_head_lr}
        """Learning rate of each of `FlowRL.policy_parameter_sets`."""
        groups = [{"params": params, "lr": self.lrs[name], "name": name}
                  for name, params in self.model.policy_parameter_sets().items()]
        groups.append({"params": list(self.model.critic.parameters()), "lr": ppo.critic_lr, "name": "critic"})
        self.optimizer = torch.optim.AdamW(groups, weight_decay=0.0)
        self.max_grad_norm = cfg.optim.max_grad_norm
        self.average = weight_average(self.model, cfg)
        self.generator: torch.Generator | None = None
        """The run's generator (minibatch order), given by the runner."""
        # with a learned start and the chain frozen, the transitions' log-probs cannot change: re-evaluate the start
        self.chain_trains = self.model.start is None or ppo.lr > 0

    def scenes(self, first: int, episodes: int) -> list[int]:
        return scene_groups(first, episodes)

    def rollout_spec(self) -> RolloutSpec:
        return RolloutSpec(sigmas=self.sigmas, scored=True)

    def draws(self, size: int, generator: torch.Generator) -> Draws:
        x0, noise = chain_draws(self.model.policy, size, generator, noisy=True)
        spread = torch.randn(size, 1, generator=generator) if self.model.spread_noise > 0 else None
        return x0, noise, spread

    def update(self, storage: Storage, episodes: list[dict], iteration: int) -> dict:
        ppo, model = self.cfg, self.model
        storage.finish(ppo.gamma, ppo.lam)
        critic_only = iteration <= ppo.critic_warmup
        advantages = normalized(storage.advantages)
        if not ppo.push_away:
            advantages = advantages.clamp_min(0.0)
        scored = model.scored_mask()
        stats: dict[str, list[float]] = {key: [] for key in ("pg_loss", "v_loss", "kl", "clipfrac", "clip_active",
                                                             "grad_norm", "spread_kl", "spread_clipfrac")}
        epochs_done, kl_stop = 0, False
        model.train(False)  # no dropout: the log-probs must be those of the sampling policy
        for _ in range(ppo.epochs):
            epoch_kl = []
            order = torch.randperm(len(storage), generator=self.generator)
            for start in range(0, len(storage), ppo.minibatch):
                index = order[start:start + ppo.minibatch]
                chain, prefix, state, old_log_probs = storage.minibatch(index)
                spreads = storage.spreads(index)
                drawn = None if spreads is None else spreads[0]
                fixed = None if self.chain_trains else old_log_probs[:, model.start_rows:]
                log_probs = model.evaluate(chain, prefix, self.sigmas, drawn, transitions=fixed)
                value = model.value(cast_prefix(prefix, torch.float32), state)
                v_loss = 0.5 * ((value - storage.returns[index]) ** 2).mean()
                terms = clipped_policy_loss(element_log_ratios(log_probs, old_log_probs, scored), advantages[index],
                                            ppo.clip)
                pg_loss = terms["pg_loss"]
                if spreads is not None:  # each decision's drawn log-spread has its own clipped term
                    spread_terms = clipped_policy_loss(model.spread_log_probs(drawn, prefix) - spreads[1],
                                                       advantages[index], ppo.clip)
                    pg_loss = pg_loss + spread_terms["pg_loss"]
                    stats["spread_kl"].append(float(spread_terms["kl"]))
                    stats["spread_clipfrac"].append(float(spread_terms["clipfrac"]))
                loss = ppo.vf_coef * v_loss if critic_only else pg_loss + ppo.vf_coef * v_loss
                self.optimizer.zero_grad()
                loss.backward()
                if critic_only:
                    for parameter in model.policy.parameters():
                        parameter.grad = None
                grad_norm = torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.grad is not None],
                                                           self.max_grad_norm)
                self.optimizer.step()
                if self.average is not None and not critic_only:
                    self.average.update(model.policy)
                element_kl = float(approx_kl(element_log_ratios(log_probs.detach(), old_log_probs, scored)))
                epoch_kl.append(element_kl)
                stats["kl"].append(element_kl)
                stats["pg_loss"].append(float(pg_loss.detach()))
                stats["v_loss"].append(float(v_loss.detach()))
                stats["clipfrac"].append(float(terms["clipfrac"]))
                stats["clip_active"].append(float(terms["clip_active"]))
                stats["grad_norm"].append(float(grad_norm))
            epochs_done += 1
            if ppo.target_kl and sum(epoch_kl) / len(epoch_kl) > ppo.target_kl:
                kl_stop = True
                break
        out = {key: sum(values) / len(values) for key, values in stats.items() if values}
        return {**out, "epochs_done": epochs_done, "kl_stop": kl_stop,
                "explained_variance": explained_variance(storage.values, storage.returns),
                "sigma_mean": float(self.sigmas[:, :model.policy.action_dim].mean())}

    def check(self, storage: Storage) -> dict:
        return self_check(self.model, storage, sigmas=self.sigmas, lrs=self.lrs, clip=self.cfg.clip)

    def state_dict(self) -> dict:
        return {"critic": self.model.critic.state_dict(), "optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.model.critic.load_state_dict(state["critic"])
        self.optimizer.load_state_dict(state["optimizer"])
