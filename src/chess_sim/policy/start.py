"""The chain's learned start, wrapped around any FlowPolicy: x_0 ~ N(0, s^2) instead of N(0, I).

One log-spread `log_std` is shared by every element of the chunk, and a small head on the prefix's pooled features
(`policy.features`) adds to it per observation: log s(obs) = log_std + head(features). Both start at zero (the head's
last layer is zero), so a policy given a start samples exactly as before until RL moves it. This is latent-noise
steering of the start's spread, a temperature per observation (what it did on the baseline: docs/experiments.md).

Shapes: features (B, F) -> log-spread (B, 1) -> spread (B, 1) within `START_SPREAD_BOUNDS`; the start distribution a
FlowPolicy reports is a mean of 0 and a spread (B, 1, 1) that broadcasts over the chunk (B, T, C).

Files: a steered policy is its base policy's files plus `start.safetensors` and `start.json`;
`policy.loading.load_policy` wraps a directory holding them.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from chess_sim import atomic
from chess_sim.config import START_SPREAD_BOUNDS
from chess_sim.errors import first_line

START_WEIGHTS = "start.safetensors"
START_CONFIG = "start.json"


class StartDistribution(nn.Module):
    """The learned spread: a shared log-spread plus a per-observation head (see the module docstring)."""

    def __init__(self, features: int, width: int = 128):
        super().__init__()
        self.features, self.width = features, width
        self.log_std = nn.Parameter(torch.zeros(1))
        self.head = nn.Sequential(nn.Linear(features, width), nn.Tanh(), nn.Linear(width, 1))
        nn.init.zeros_(self.head[-1].weight)
        nn.init.zeros_(self.head[-1].bias)

    def log_spread(self, features: torch.Tensor) -> torch.Tensor:
        """(B, F) pooled prefix features -> (B, 1) log-spread before its bounds."""
        assert features.ndim == 2 and features.shape[1] == self.features, \
            f"features must be (B, {self.features}), got {tuple(features.shape)}"
        return self.log_std + self.head(features.float())

    def std_of(self, log_spread: torch.Tensor) -> torch.Tensor:
        """(B, 1) log-spreads (the policy's, or ones a decision drew around it) -> spreads within `START_SPREAD_BOUNDS`."""
        return log_spread.exp().clamp(*START_SPREAD_BOUNDS)

    def std(self) -> torch.Tensor:
        """(1,) the shared spread, where the head's output is zero."""
        return self.std_of(self.log_std)


class SteeredPolicy(nn.Module):
    """A FlowPolicy (see `policy/base.py`) whose chain starts from a `StartDistribution`; everything else is the
    base policy's."""

    def __init__(self, base, start: StartDistribution | None = None, features: int | None = None):
        super().__init__()
        self.base = base
        self.start = start if start is not None else StartDistribution(features or feature_size(base))
        self.chunk, self.action_dim, self.chain_dim, self.steps = base.chunk, base.action_dim, base.chain_dim, base.steps
        self.time_power, self.image_size = base.time_power, base.image_size
        self.normalizer = base.normalizer

    @property
    def action_steps(self) -> int:
        return self.base.action_steps

    def set_action_steps(self, steps: int) -> None:
        self.base.set_action_steps(steps)

    def set_sampler(self, steps: int, time_power: int) -> None:
        self.base.set_sampler(steps, time_power)
        self.steps, self.time_power = self.base.steps, self.base.time_power

    def encode(self, batch: dict[str, Any]) -> Any:
        return self.base.encode(batch)

    def velocity(self, prefix: Any, x_t: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return self.base.velocity(prefix, x_t, t)

    def prepare_chain(self, prefix: Any) -> Any:
        return self.base.prepare_chain(prefix)

    def features(self, prefix: Any) -> torch.Tensor:
        return self.base.features(prefix)

    def start_log_spread(self, prefix: Any) -> torch.Tensor:
        """(B, 1) the start's log-spread for each observation of the prefix."""
        return self.start.log_spread(self.features(prefix))

    def start_distribution(self, prefix: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean 0 and the spread (B, 1, 1) of each observation."""
        std = self.start.std_of(self.start_log_spread(prefix))
        return std.new_zeros(()), std[:, :, None]

    def save(self, directory) -> None:
        directory = Path(directory)
        self.base.save(directory)
        state = {name: tensor.detach().contiguous() for name, tensor in self.start.state_dict().items()}
        atomic.write_file(directory / START_WEIGHTS, lambda path: save_file(state, str(path)))
        atomic.write_text(directory / START_CONFIG,
                          json.dumps({"features": self.start.features, "width": self.start.width}, indent=2) + "\n")


def with_spread(policy, spread: float, features: int | None = None) -> SteeredPolicy:
    """`policy` given a new start at the hand-set spread `spread` (its head zero): a temperature saved with the policy,
    so evaluation, DAgger and RL sample at it by default. ValueError for a policy that has its own start (its head may
    have learned a per-observation spread that a new shared one would misread) or a spread outside the start's range."""
    low, high = START_SPREAD_BOUNDS
    if isinstance(policy, SteeredPolicy):
        raise ValueError("the policy already has its own start; give the spread to the policy it was made from")
    if not low <= spread <= high:
        raise ValueError(f"the start's spread must be within [{low}, {high}], got {spread}")
    wrapped = SteeredPolicy(policy, features=features).train(policy.training)
    with torch.no_grad():
        wrapped.start.log_std.fill_(math.log(spread))
    return wrapped


def has_start(directory) -> bool:
    return (Path(directory) / START_CONFIG).is_file()


def load_start(base, directory) -> SteeredPolicy:
    """`base` (already loaded from `directory`) with the start saved beside it; ValueError (one line) when the start
    files are damaged or do not fit the policy."""
    directory = Path(directory)
    try:
        sizes = json.loads((directory / START_CONFIG).read_text())
        start = StartDistribution(int(sizes["features"]), int(sizes["width"]))
        start.load_state_dict(load_file(str(directory / START_WEIGHTS)))
    except Exception as error:  # noqa: BLE001 - any failure to read a user-given file is a bad input
        raise ValueError(f"{directory} holds a damaged start distribution: {first_line(error)}") from None
    given = feature_size(base)
    if start.features != given:
        raise ValueError(f"{directory}: the start distribution reads {start.features} features, the policy gives "
                         f"{given}")
    return SteeredPolicy(base, start).train(base.training)


def feature_size(policy) -> int:
    """F of `policy.features`, measured on one blank observation (an encoder pass: a VLM prefix takes seconds)."""
    return policy.features(probe_prefix(policy)).shape[-1]


def probe_prefix(policy) -> Any:
    """A prefix of one blank observation (to size heads on the prefix features)."""
    size = 64
    blank = torch.zeros(1, 3, size, size)
    batch = {"observation.images.front": blank, "observation.images.wrist": blank,
             "observation.state": torch.zeros(1, policy.action_dim), "task": ["Move the white pawn from e2 to e4."]}
    with torch.no_grad():
        return policy.encode(batch)
