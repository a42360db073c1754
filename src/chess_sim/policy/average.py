"""An exponential moving average of a policy's trained weights (`OptimConfig.ema`, `TrainConfig.ema`).

Fine-tuning harms a strong policy through the minibatch noise of each step more than through its direction
(docs/experiments.md). So a run's rollouts and updates use the live weights, while what it validates and saves (`best`, `last`, `iter_*`) is the average, which follows the updates' common direction and
averages their noise away. After each policy step: average <- decay * average + (1 - decay) * live.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn


class WeightAverage:
    def __init__(self, module: nn.Module, decay: float):
        """Start the average at `module`'s trainable parameters as they are now."""
        assert 0.0 < decay < 1.0, f"the average's decay must be in (0, 1), got {decay}"
        self.decay = decay
        self.average = {name: p.detach().clone() for name, p in module.named_parameters() if p.requires_grad}

    @torch.no_grad()
    def update(self, module: nn.Module) -> None:
        """Move the average towards `module`'s parameters by (1 - decay)."""
        for name, parameter in module.named_parameters():
            if name in self.average:
                self.average[name].lerp_(parameter, 1.0 - self.decay)

    @contextmanager
    def applied(self, module: nn.Module) -> Iterator[None]:
        """`module` holds the averaged weights inside the block and its live ones again after it."""
        live = self.live_weights(module)
        self.copy_into(module, self.average)
        try:
            yield
        finally:
            self.copy_into(module, live)

    def live_weights(self, module: nn.Module) -> dict[str, torch.Tensor]:
        """A copy of `module`'s current values of the averaged parameters."""
        return {name: p.detach().clone() for name, p in module.named_parameters() if name in self.average}

    @staticmethod
    @torch.no_grad()
    def copy_into(module: nn.Module, weights: dict[str, torch.Tensor]) -> None:
        """Set `module`'s parameters named in `weights` to them (every name must be one of its parameters)."""
        parameters = dict(module.named_parameters())
        if not set(weights) <= set(parameters):
            raise KeyError("the saved weights name parameters the policy does not have")
        for name, parameter in parameters.items():
            if name in weights:
                parameter.copy_(weights[name])


def averaged(module: nn.Module, average: WeightAverage | None):
    """A block in which `module` holds the average's weights; with no average, its own."""
    return average.applied(module) if average is not None else contextlib.nullcontext()
