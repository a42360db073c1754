"""Success-filtered flow matching: the update of `RLConfig.algorithm` `filtered`.

An iteration's rollout runs the noise-free chain from N(0, s^2) (`FilteredConfig.rollout_spread`); the update fits
the velocity network's flow-matching loss to the executed chunks x_K of the decisions of the successful episodes,
from fresh noise and times at every step, as imitation training does. This is reward-weighted regression with a 0/1
reward: the fitted policy moves towards pi(chunk | obs, success), which solves more scenes than pi when the fit
is close. With `FilteredConfig.anchor` > 0 the fit also pulls the velocity towards the run's start policy's at the
same points (`policy.base.flow_matching_errors`). Each iteration's fit warms its learning rate up over `fit_warmup`
steps and anneals it to 0 by its last step: fine-tuning at a constant rate leaves the last steps' minibatch noise in
the weights, which on this project's compact policy costs more than the update gains (docs/experiments.md).

Shapes: a stored decision's chain (K+1, T, C), x_K = chain[-1]; the fit's noise (B, M, T, C) and times (B, M) are
drawn per step (M = `PPOConfig.flow_draws`), so a chunk is never fitted twice with the same draw.
"""

from __future__ import annotations

import math

import torch

from chess_sim.config import FilteredConfig
from chess_sim.policy.average import WeightAverage
from chess_sim.policy.base import FlowPolicy, cast_prefix
from chess_sim.rl.flow_rl import FlowRL
from chess_sim.rl.storage import Storage
from chess_sim.threads import torch_threads


def successful_decisions(storage: Storage, rows: list[dict]) -> list[int]:
    """Indices of the stored decisions that belong to successful episodes; `rows` are the episodes' rows in the
    order their decisions were stored."""
    episodes = storage.episodes()
    assert len(episodes) == len(rows), f"{len(episodes)} stored episodes but {len(rows)} rows"
    return [index for decisions, row in zip(episodes, rows) if row["end"] == "success" for index in decisions]


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


def filtered_update(model: FlowRL, storage: Storage, chosen: list[int], optimizer: torch.optim.Optimizer,
                    cfg: FilteredConfig, max_grad_norm: float, generator: torch.Generator,
                    average: WeightAverage | None = None, reference: FlowPolicy | None = None) -> dict[str, float]:
    """Fit the flow-matching loss of the `chosen` decisions' chunks (see the module docstring) with the optimizer's
    `chain` group (the velocity network; the encoders get no gradient from stored prefixes) at the warm-up-cosine
    rate peaking at `cfg.fit_lr`; the optimizer's other groups (start, critic) are left as they are. `average`, when
    given, follows the policy's weights after every step. `reference`: the frozen start policy of `cfg.anchor`
    (needed when the weight is above 0). The fit runs on `cfg.fit_threads` threads, and the caller's thread count is
    restored after it. Returns the fit's statistics; no chosen decision, no step."""
    with torch_threads(cfg.fit_threads):
        return _fit(model, storage, chosen, optimizer, cfg, max_grad_norm, generator, average, reference)


def _fit(model: FlowRL, storage: Storage, chosen: list[int], optimizer: torch.optim.Optimizer, cfg: FilteredConfig,
         max_grad_norm: float, generator: torch.Generator, average: WeightAverage | None,
         reference: FlowPolicy | None) -> dict[str, float]:
    assert reference is not None or cfg.anchor == 0, "an anchored fit needs the reference policy"
    anchor = (reference, cfg.anchor) if cfg.anchor > 0 else None
    chain_group = next(group for group in optimizer.param_groups if group.get("name") == "chain")
    steps = fit_steps(len(chosen), cfg)
    losses, norms = [], []
    model.train(False)
    step = 0
    for _ in range(cfg.fit_epochs if chosen else 0):
        order = torch.tensor(chosen)[torch.randperm(len(chosen), generator=generator)]
        for start in range(0, len(order), cfg.fit_minibatch):
            index = order[start:start + cfg.fit_minibatch]
            chain, prefix, _, _ = storage.minibatch(index)
            noise, times = model.draw_flow(len(index), generator)
            loss = -model.flow_log_probs(chain, cast_prefix(prefix, torch.float32), noise, times, anchor).mean()
            chain_group["lr"] = cfg.fit_lr * warmup_cosine(step, steps, cfg.fit_warmup)
            optimizer.zero_grad()
            loss.backward()
            norms.append(float(torch.nn.utils.clip_grad_norm_(chain_group["params"], max_grad_norm)))
            optimizer.step()  # the other groups have no gradient (zero_grad cleared them; the loss is the velocity's)
            if average is not None:
                average.update(model.policy)
            losses.append(float(loss.detach()))
            step += 1
    if not losses:
        return {"fitted": 0, "fit_steps": 0}
    last_epoch = losses[-math.ceil(len(chosen) / cfg.fit_minibatch):]
    return {"fitted": len(chosen), "fit_steps": step, "fit_loss_first_epoch": _mean(losses[:len(last_epoch)]),
            "fit_loss_last_epoch": _mean(last_epoch), "grad_norm": _mean(norms)}


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)
