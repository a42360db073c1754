"""The weight average of RL fine-tuning against hand calculations."""

import pytest
import torch
from torch import nn

from chess_sim.policy.average import WeightAverage


def two_weights() -> nn.Module:
    module = nn.Linear(1, 1)
    with torch.no_grad():
        module.weight.fill_(0.0)
        module.bias.fill_(5.0)
    module.bias.requires_grad_(False)
    return module


def test_the_average_moves_by_one_minus_the_decay_per_update_and_leaves_frozen_weights_alone():
    module = two_weights()
    average = WeightAverage(module, 0.9)
    assert set(average.average) == {"weight"}
    with torch.no_grad():
        module.weight.fill_(1.0)
    average.update(module)
    assert average.average["weight"].item() == pytest.approx(0.1)
    average.update(module)
    assert average.average["weight"].item() == pytest.approx(0.19)


def test_the_average_is_applied_inside_the_block_and_the_live_weights_return_after_it():
    module = two_weights()
    average = WeightAverage(module, 0.5)
    with torch.no_grad():
        module.weight.fill_(2.0)
    average.update(module)
    with average.applied(module):
        assert module.weight.item() == 1.0 and module.bias.item() == 5.0
    assert module.weight.item() == 2.0
    with pytest.raises(RuntimeError), average.applied(module):
        raise RuntimeError("an error inside the block")
    assert module.weight.item() == 2.0


def test_weights_of_another_module_are_refused():
    with pytest.raises(KeyError, match="does not have"):
        WeightAverage.copy_into(two_weights(), {"encoder.weight": torch.zeros(1, 1)})
