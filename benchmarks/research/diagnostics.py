"""Diagnostics of the RL method, outside the update itself: how much signal one PPO gradient carries
(`rl_signal.py` measures it before a long run is spent on a lever)."""

from __future__ import annotations

from typing import Any

import torch

from chess_sim.rl.flow_rl import FlowRL


def episode_gradients(model: FlowRL, sigmas: torch.Tensor,
                      episodes: list[tuple[torch.Tensor, Any, torch.Tensor, torch.Tensor]], steps: slice) -> torch.Tensor:
    """(N, P) per-episode policy gradients at ratio 1 of the policy's trainable parameters: for each episode's
    decisions (chains (D, K+1, T, C), prefix, states (D, A), advantages (D,)), the gradient of
    sum_d A_d * sum over the log-probs of denoising `steps` (rows of the transitions, noise sizes `sigmas` (K, C)),
    timesteps and joints, of the elements PPO scores (`FlowRL.scored_mask`)."""
    params = [p for p in model.policy.parameters() if p.requires_grad]
    scored = model.scored_mask()
    factor = 1.0 if scored is None else scored.float()
    rows = []
    for chain, prefix, _, advantages in episodes:
        log_probs = model.evaluate(chain, prefix, sigmas)
        transitions = (log_probs * factor)[:, -model.policy.steps:]
        surrogate = (transitions[:, steps].sum(dim=(1, 2, 3)) * advantages).sum()
        rows.append(_flat_gradient(surrogate, params))
    return torch.stack(rows)


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
