"""A flow policy's chain in a lower floating-point precision: what RL rollouts may sample with
(`FilteredConfig.chain_dtype`).

The chain's velocity calls are most of a decision's cost on the CPU, and they are matrix products that CPUs with
bfloat16 dot products (AVX512_BF16, AMX) compute faster (docs/benchmarks.md). `LoweredChain` runs the velocity network on a copy of the policy in `dtype` (the whole policy is
copied; only its chain's part runs): the prefix, encoded in float32, is cast down once per chain, and each call
casts x_k (B, T, C) down and v (B, T, C) back to float32, so the chain's states and Euler sums, the encoder, the
start and the critic all stay in float32 (the compact policy also computes its attention another way below float32,
`compact._lowered_attention`). Only the compact policy's chain can be lowered (`check_lowerable`); on a CPU
without bfloat16 dot products it gains nothing. What changes is the velocity's rounding, hence the actions, and as
contact-rich episodes amplify such changes, an episode's outcome may differ: the same policy within the statistics
(docs/experiments.md, chain precision), but not bit for bit, which is why evaluations and validations never use it.
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from chess_sim.config import CHAIN_DTYPES
from chess_sim.policy.base import cast_prefix
from chess_sim.policy.compact import CompactPolicy


class LoweredChain:
    """What `policy.base.denoise` needs of a policy (its sampler's sizes, `prepare_chain`, `velocity`), computed by
    a copy of `policy` in `dtype`. Built from the policy's weights as they are now: build it again after they
    change."""

    def __init__(self, policy, dtype: torch.dtype):
        assert dtype.is_floating_point, f"a chain needs a floating-point dtype, got {dtype}"
        self.chunk, self.chain_dim = policy.chunk, policy.chain_dim
        self.steps, self.time_power = policy.steps, policy.time_power
        self.dtype = dtype
        self.lowered = copy.deepcopy(policy).to(dtype).eval()

    @torch.no_grad()
    def prepare_chain(self, prefix: Any) -> Any:
        """The float32 prefix cast to the chain's dtype, with what every step shares computed in it."""
        return self.lowered.prepare_chain(cast_prefix(prefix, self.dtype))

    @torch.no_grad()
    def velocity(self, prefix: Any, x_t: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """v(x_t, t) in float32 from x_t (B, T, C) float32 and t (B,): computed in the chain's dtype (the flow
        time's embedding itself is computed in float32 by the policy)."""
        return self.lowered.velocity(prefix, x_t.to(self.dtype), t).float()


def check_lowerable(policy, dtype: str) -> None:
    """ValueError (one line) where `policy`'s chain cannot run in the precision named `dtype`
    (`config.CHAIN_DTYPES`): below float32, only the compact policy's (steered or not)."""
    assert dtype in CHAIN_DTYPES, f"chain dtype must be one of {', '.join(CHAIN_DTYPES)}, got {dtype!r}"
    if dtype != "float32" and not isinstance(getattr(policy, "base", policy), CompactPolicy):
        raise ValueError(f"a {dtype} chain is built for the compact policy only: give --chain-dtype float32")


def lowered_chain(policy, dtype: str) -> LoweredChain | None:
    """The chain of `policy` in the precision named `dtype`; None for float32, the policy's own."""
    check_lowerable(policy, dtype)
    return None if dtype == "float32" else LoweredChain(policy, getattr(torch, dtype))
