"""Diagnostics of the RL method, outside the update itself: how much signal one PPO gradient carries
(`benchmarks/rl_signal.py` measures it per lever before a long run is spent on it)."""

from __future__ import annotations

from typing import Any

import torch

from chess_sim.policy.base import cast_prefix
from chess_sim.rl.flow_rl import FlowRL


def episode_gradients(model: FlowRL, episodes: list[tuple[torch.Tensor, Any, torch.Tensor, torch.Tensor]],
                      steps: slice) -> torch.Tensor:
    """(N, P) per-episode policy gradients at ratio 1 of the policy's trainable parameters: for each episode's
    decisions (chains (D, K+1, T, C), prefix, states (D, A), advantages (D,)), the gradient of
    sum_d A_d * sum over the log-probs of denoising `steps` (rows of the transitions), timesteps and joints, of
    the elements PPO scores (`FlowRL.scored_mask`)."""
    params = [p for p in model.policy.parameters() if p.requires_grad]
    scored = _scored(model)
    rows = []
    for chain, prefix, state, advantages in episodes:
        log_probs, _ = model.evaluate(chain, prefix, state)
        transitions = (log_probs * scored)[:, -model.policy.steps:]
        surrogate = (transitions[:, steps].sum(dim=(1, 2, 3)) * advantages).sum()
        rows.append(_flat_gradient(surrogate, params))
    return torch.stack(rows)


def episode_flow_gradients(model: FlowRL, episodes: list[tuple[torch.Tensor, Any, torch.Tensor, torch.Tensor]],
                           generator: torch.Generator) -> torch.Tensor:
    """(N, P) per-episode gradients at ratio 1 of the flow surrogate (FPO; `FlowRL.flow_log_probs`): for each
    episode's decisions (as in `episode_gradients`), the gradient of sum_d A_d * the mean of its surrogate
    elements, minus the flow-matching errors of the chunk the decision executed (the chain's end x_K) under
    `model.flow_draws` (noise, time) draws from `generator`, the elements PPO scores kept (`FlowRL.scored_mask`;
    the others count as 0). No noise size enters: the score has no 1 / sigma."""
    params = [p for p in model.policy.parameters() if p.requires_grad]
    scored = _scored(model)
    rows = []
    for chain, prefix, _, advantages in episodes:
        draws = model.draw_flow(len(chain), generator)
        elements = model.flow_log_probs(chain, cast_prefix(prefix, torch.float32), *draws) * scored
        rows.append(_flat_gradient((elements.mean(dim=(1, 2, 3)) * advantages).sum(), params))
    return torch.stack(rows)


def _scored(model: FlowRL) -> torch.Tensor | float:
    """The model's scored mask as a factor on a decision's elements; 1 when all count."""
    scored = model.scored_mask()
    return 1.0 if scored is None else scored.float()


def _flat_gradient(surrogate: torch.Tensor, params: list[torch.nn.Parameter]) -> torch.Tensor:
    """(P,) the gradient of `surrogate` over `params`, zeros where a parameter does not enter."""
    grads = torch.autograd.grad(surrogate, params, allow_unused=True)
    return torch.cat([(g if g is not None else torch.zeros_like(p)).flatten() for g, p in zip(grads, params)])


def gradient_noise_scale(gradients: torch.Tensor) -> dict:
    """Signal and noise of a gradient from N independent per-episode gradients (N, P): unbiased estimates of the
    true gradient's squared norm |G|^2 and of the per-episode noise tr(Sigma), the simple noise scale
    B = tr(Sigma) / |G|^2 (McCandlish et al., 2018; about the episodes one gradient needs before its signal
    matches its noise; None when no signal is measurable, |G|^2 <= 0), and the cosine between the gradients
    of the odd and the even episodes. (Episodes that share one batch's advantage normalisation are independent
    only up to O(1/n).) Sums run in float64: with B >> n, |G|^2 is a small difference of large sums."""
    gradients = gradients.double()
    n = gradients.shape[0]
    assert n >= 2, "the noise scale needs at least two episodes"
    total = gradients.sum(0)
    squares = float((gradients ** 2).sum())
    signal = (float(total @ total) - squares) / (n * (n - 1))
    mean = total / n
    noise = (squares - n * float(mean @ mean)) / (n - 1)
    halves = gradients[0::2].sum(0), gradients[1::2].sum(0)
    return {"signal_sq": signal, "noise_trace": noise, "noise_scale_episodes": noise / signal if signal > 0 else None,
            "halves_cosine": float(torch.nn.functional.cosine_similarity(*halves, dim=0))}
