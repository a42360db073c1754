"""PPO's clipped surrogate with one ratio per element, and the approximate KL (any algorithm that compares
likelihoods).

The log-prob of one denoising step sums T x C elements and moves by far more than the clip range after one small
update, so one ratio per step or per chunk would sit outside [1 - clip, 1 + clip] almost always. As tokens in
language-model PPO, every element (step x timestep x chain dimension) has its own clipped ratio.
"""

from __future__ import annotations

import torch

LOG_RATIO_BOUND = 20.0
"""Log ratios are clamped to +-this before use (as ReinFlow's PPO does): one element far off (a tiny noise size makes
a log-density steep) would otherwise overflow exp() and inflate the KL that stops the epochs early. The clamp only
touches elements far outside the clip range; it zeroes their gradient, which the clip keeps on the pessimistic side
(negative advantage, r > 1 + clip) scaled by r, i.e. at least exp(20) times the element's score."""


def element_log_ratios(new: torch.Tensor, old: torch.Tensor, scored: torch.Tensor | None = None) -> torch.Tensor:
    """Per-element log ratios from log-probs (B, R, T, C): all of them, or (B, N) for the N elements `scored`
    (R, T, 1) bool keeps."""
    difference = new - old
    return difference if scored is None else difference[:, scored.expand(difference.shape[1:])]


def clipped_policy_loss(log_ratios: torch.Tensor, advantages: torch.Tensor, clip: float) -> dict[str, torch.Tensor]:
    """PPO's clipped surrogate with each ratio clipped on its own; `advantages` (B,) broadcast over the ratio's
    other dimensions. Also `kl` (the mean of (r - 1) - log r), `clipfrac` as CleanRL and ReinFlow log it (the share
    of ratios with |r - 1| > clip) and `clip_active` (the share where the clipped term is the smaller one, so the
    clip cuts the gradient off)."""
    log_ratios = log_ratios.clamp(-LOG_RATIO_BOUND, LOG_RATIO_BOUND)
    ratio = log_ratios.exp()
    advantage = advantages.reshape(-1, *([1] * (ratio.ndim - 1)))
    unclipped, clipped = ratio * advantage, ratio.clamp(1.0 - clip, 1.0 + clip) * advantage
    surrogate = torch.min(unclipped, clipped)
    with torch.no_grad():
        clipfrac = ((ratio - 1.0).abs() > clip).float().mean()
        clip_active = (clipped < unclipped).float().mean()
    return {"pg_loss": -surrogate.mean(), "kl": approx_kl(log_ratios.detach()), "clipfrac": clipfrac,
            "clip_active": clip_active}


def approx_kl(log_ratios: torch.Tensor) -> torch.Tensor:
    """Mean of (r - 1) - log r: an unbiased, non-negative estimate of KL(old || new), from log ratios clamped to
    +-`LOG_RATIO_BOUND`. Computed in float64 with expm1: in float32 the rounding of r - 1 exceeds the estimate for
    log ratios below ~1e-4 and can make it negative. Returned in the log ratios' dtype."""
    log_ratios64 = log_ratios.clamp(-LOG_RATIO_BOUND, LOG_RATIO_BOUND).double()
    return (torch.expm1(log_ratios64) - log_ratios64).mean().to(log_ratios.dtype)
