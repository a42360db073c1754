"""Success-filtered flow matching (`--algorithm filtered`, `FilteredConfig`): reward-weighted regression with a 0/1
reward, the compact profile's algorithm.

Rollout: the noise-free chain from N(0, I) (x_0 = the standard-normal draw, whatever start the policy brings), in
`chain_dtype`; no log-probs, no critic. Update: fit the velocity network's flow-matching loss to the executed chunks
x_K of the decisions of the successful episodes, from fresh (noise, time) draws at every step as imitation training
does, so the fitted policy moves towards pi(chunk | obs, success). With `anchor` w > 0 the loss adds
w |v - v_start|^2 at the same points, v_start the run's start policy's velocity (`policy.base.flow_matching_errors`),
against the drift of repeated self-fits. Each fit warms its learning rate up over `fit_warmup` steps and anneals it
to 0 by its last step, so no minibatch's noise is left in the weights at full size. The start, when the policy has
one, stays as it is: validations and the saved policy use it.

Groups (`group_size` K > 1, as RIPT-VLA groups its rollouts): each training scene is rolled out K times from
different draws. A scene solved k times of K weighs each of its successes by the leave-one-out advantage
1 - (k - 1) / (K - 1) = (K - k) / (K - 1): 1 for the only success of a scene, 0 for a scene solved every time (it
teaches nothing the policy does not do already); scenes never solved have no success to fit. Each minibatch's loss
is the weighted mean of its decisions' flow-matching errors over the mean weight of all fitted decisions, so the
learning rate keeps its scale. With K = 1 every success is fitted with weight 1.

Shapes: a stored decision's chain (K+1, T, C), x_K = chain[-1]; the fit's noise (B, M, T, C) and times (B, M),
M = `fit_draws`, drawn per step.
"""

from __future__ import annotations

import math
from typing import Callable

import torch

from chess_sim.config import FilteredConfig, RLConfig, TrainConfig
from chess_sim.policy.base import FlowPolicy, cast_prefix, flow_matching_errors, flow_times
from chess_sim.policy.precision import check_lowerable, lowered_chain
from chess_sim.rl.algorithms.base import chain_draws, named_groups, prefix_dtype, scene_groups, weight_average
from chess_sim.rl.check import self_check
from chess_sim.rl.flow_rl import Draws, FlowRL, RolloutSpec, repeat_prefix
from chess_sim.rl.storage import Storage
from chess_sim.threads import torch_threads


class SuccessFiltered:
    log_keys = ("fitted", "fit_steps", "fit_loss_first_epoch", "fit_loss_last_epoch", "grad_norm", "mixed_scenes",
                "solved_scenes")
    headline = (("fitted", "fitted {} decisions"),)

    def __init__(self, policy: FlowPolicy, cfg: RLConfig, start_policy: Callable[[], FlowPolicy]):
        self.cfg = fit = cfg.algorithm
        check_lowerable(policy, fit.chain_dtype)
        if cfg.run.episodes % fit.group_size:
            raise ValueError(f"episodes ({cfg.run.episodes}) must be a multiple of group_size ({fit.group_size})")
        self.model = FlowRL(policy, cfg.start, prefix_dtype=prefix_dtype(policy)).eval()
        self.chain = self.model.policy_parameter_sets()["chain"]
        """The velocity network's parameters (the encoders get no gradient from stored prefixes)."""
        self.optimizer = torch.optim.AdamW([{"params": self.chain, "lr": fit.fit_lr, "name": "chain"}],
                                           weight_decay=0.0)
        self.max_grad_norm = cfg.optim.max_grad_norm
        self.average = weight_average(self.model, cfg)
        self.reference = start_policy().eval().requires_grad_(False) if fit.anchor > 0 else None
        """The frozen start policy the fits are anchored to; None without an anchor."""
        self.generator: torch.Generator | None = None
        """The run's generator (minibatch order and the fit's draws), given by the runner."""

    def scenes(self, first: int, episodes: int) -> list[int]:
        return scene_groups(first, episodes, self.cfg.group_size)

    def rollout_spec(self) -> RolloutSpec:
        return RolloutSpec(start_spread=1.0, lowered=lowered_chain(self.model.policy, self.cfg.chain_dtype))

    def draws(self, size: int, generator: torch.Generator) -> Draws:
        x0, _ = chain_draws(self.model.policy, size, generator, noisy=False)
        # Runs before the one-module-per-algorithm layout drew a fit's (noise, time) per decision here; drawing them
        # still keeps every run's random stream, and so its results and its resumes, what they were.
        fit_draws(self.model.policy, size, self.cfg.fit_draws, generator)
        return x0, None, None

    def update(self, storage: Storage, episodes: list[dict], iteration: int) -> dict:
        """Fit the chunks of the successful episodes' decisions on `fit_threads` threads (the caller's thread count
        is restored after it); no success, no step."""
        chosen, weights = weighted_decisions(storage, episodes)
        with torch_threads(self.cfg.fit_threads):
            stats = self._fit(storage, chosen, weights)
        return {**stats, **_scene_counts(episodes)}

    def _fit(self, storage: Storage, chosen: list[int], weights: dict[int, float]) -> dict:
        fit, model = self.cfg, self.model
        anchor = (self.reference, fit.anchor) if self.reference is not None else None
        group = self.optimizer.param_groups[0]
        steps = fit_steps(len(chosen), fit)
        mean_weight = sum(weights[i] for i in chosen) / len(chosen) if chosen else 1.0
        losses, norms = [], []
        model.train(False)
        step = 0
        for _ in range(fit.fit_epochs if chosen else 0):
            order = torch.tensor(chosen)[torch.randperm(len(chosen), generator=self.generator)]
            for start in range(0, len(order), fit.fit_minibatch):
                index = order[start:start + fit.fit_minibatch]
                chain, prefix, _, _ = storage.minibatch(index)
                noise, times = fit_draws(model.policy, len(index), fit.fit_draws, self.generator)
                errors = chunk_errors(model.policy, chain, cast_prefix(prefix, torch.float32), noise, times, anchor)
                weight = torch.tensor([weights[i] for i in index.tolist()])[:, None, None, None]
                loss = (errors * weight).mean() / mean_weight
                group["lr"] = fit.fit_lr * warmup_cosine(step, steps, fit.fit_warmup)
                self.optimizer.zero_grad()
                loss.backward()
                norms.append(float(torch.nn.utils.clip_grad_norm_(self.chain, self.max_grad_norm)))
                self.optimizer.step()
                if self.average is not None:
                    self.average.update(model.policy)
                losses.append(float(loss.detach()))
                step += 1
        if not losses:
            return {"fitted": 0, "fit_steps": 0}
        last_epoch = losses[-math.ceil(len(chosen) / fit.fit_minibatch):]
        return {"fitted": len(chosen), "fit_steps": step, "fit_loss_first_epoch": _mean(losses[:len(last_epoch)]),
                "fit_loss_last_epoch": _mean(last_epoch), "grad_norm": _mean(norms)}

    def check(self, storage: Storage) -> dict:
        return self_check(self.model, storage, lowered=lowered_chain(self.model.policy, self.cfg.chain_dtype))

    def state_dict(self) -> dict:
        return {"optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.optimizer.load_state_dict(named_groups(state["optimizer"], ("chain",)))


def weighted_decisions(storage: Storage, rows: list[dict]) -> tuple[list[int], dict[int, float]]:
    """The stored decisions a fit takes, in storage order, and each one's weight: those of successful episodes,
    weighted by their scene's leave-one-out advantage (module docstring; 1 where a scene was rolled out once), those
    of weight 0 left out. `rows` are the episodes' rows in the order their decisions were stored; a scene is its
    row's `index`."""
    episodes = storage.episodes()
    assert len(episodes) == len(rows), f"{len(episodes)} stored episodes but {len(rows)} rows"
    runs, solved = {}, {}
    for row in rows:
        runs[row["index"]] = runs.get(row["index"], 0) + 1
        solved[row["index"]] = solved.get(row["index"], 0) + (row["end"] == "success")
    weights = {}
    for decisions, row in zip(episodes, rows):
        size, successes = runs[row["index"]], solved[row["index"]]
        weight = 1.0 if size == 1 else (size - successes) / (size - 1)
        if row["end"] == "success" and weight > 0:
            weights.update(dict.fromkeys(decisions, weight))
    return sorted(weights), weights


def _scene_counts(rows: list[dict]) -> dict[str, int]:
    """How many of the rollout's scenes had mixed outcomes, and how many were solved every time."""
    outcomes: dict[int, set] = {}
    for row in rows:
        outcomes.setdefault(row["index"], set()).add(row["end"] == "success")
    return {"mixed_scenes": sum(len(seen) == 2 for seen in outcomes.values()),
            "solved_scenes": sum(seen == {True} for seen in outcomes.values())}


def fit_draws(policy: FlowPolicy, rows: int, draws: int, generator: torch.Generator) -> tuple[torch.Tensor,
                                                                                              torch.Tensor]:
    """A fit's draws for `rows` decisions: noise (rows, M, T, C) ~ N(0, 1) and flow times (rows, M) ~
    Beta(`TrainConfig.time_beta`, 1) at its default, the distribution this project's policies are trained with."""
    noise = torch.randn(rows, draws, policy.chunk, policy.chain_dim, generator=generator)
    return noise, flow_times(rows * draws, TrainConfig.time_beta, generator).view(rows, draws)


def chunk_errors(policy: FlowPolicy, chain: torch.Tensor, prefix, noise: torch.Tensor, times: torch.Tensor,
                 anchor: tuple[FlowPolicy, float] | None = None) -> torch.Tensor:
    """(B, M, T, A) flow-matching errors of the executed chunks (the chains' ends; chain (B, K+1, T, C)) under draws
    noise (B, M, T, C) and times (B, M); `anchor` as in `flow_matching_errors`."""
    batch, draws = times.shape
    assert noise.shape == (batch, draws, policy.chunk, policy.chain_dim), \
        f"noise must be ({batch}, {draws}, {policy.chunk}, {policy.chain_dim}), got {tuple(noise.shape)}"
    actions = chain[:, -1, :, :policy.action_dim].repeat_interleave(draws, dim=0)
    errors = flow_matching_errors(policy, repeat_prefix(prefix, draws), actions, noise.flatten(0, 1), times.flatten(),
                                  anchor)
    return errors.view(batch, draws, policy.chunk, policy.action_dim)


def warmup_cosine(step: int, steps: int, warmup: int) -> float:
    """The learning rate's factor at Adam step `step` (0-based) of `steps`: (step + 1) / warmup during the warm-up,
    then a half cosine from 1 down to 0 at the last step."""
    if step < warmup:
        return (step + 1) / warmup
    remaining = steps - 1 - warmup
    return 1.0 if remaining <= 0 else 0.5 * (1.0 + math.cos(math.pi * (step - warmup) / remaining))


def fit_steps(decisions: int, cfg: FilteredConfig) -> int:
    """Adam steps of a fit over `decisions` chosen decisions."""
    return cfg.fit_epochs * math.ceil(decisions / cfg.fit_minibatch)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)
