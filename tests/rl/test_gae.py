"""GAE against a hand calculation, the advantages' normalisation and the explained variance."""

import math

import pytest
import torch

from chess_sim.rl.gae import explained_variance, gae, normalized


def test_gae_by_hand_with_a_terminal_and_a_time_limit_end():
    # Episode 1: two decisions, terminal (next value 0). Episode 2: one decision cut by the time limit,
    # bootstrapped from the value 0.6 of its final observation.
    rewards = torch.tensor([0.0, 1.0, 0.5])
    values = torch.tensor([0.2, 0.4, 0.3])
    next_values = torch.tensor([0.4, 0.0, 0.6])
    ends = torch.tensor([False, True, True])
    advantages, returns = gae(rewards, values, next_values, ends, gamma=0.9, lam=0.8)
    a1 = 1.0 - 0.4
    a0 = (0.9 * 0.4 - 0.2) + 0.9 * 0.8 * a1
    a2 = 0.5 + 0.9 * 0.6 - 0.3  # no leak from episode 1 across the boundary
    assert advantages.tolist() == pytest.approx([a0, a1, a2])
    assert returns.tolist() == pytest.approx([a0 + 0.2, a1 + 0.4, a2 + 0.3])


def test_normalized_advantages_have_mean_0_and_std_1():
    advantages = normalized(torch.tensor([1.0, 2.0, 3.0, 6.0]))
    assert float(advantages.mean()) == pytest.approx(0.0, abs=1e-6)
    assert float(advantages.std(correction=0)) == pytest.approx(1.0, abs=1e-5)
    assert advantages.tolist() == pytest.approx([(x - 3.0) / math.sqrt(3.5) for x in (1.0, 2.0, 3.0, 6.0)], rel=1e-5)


def test_explained_variance_by_hand():
    returns = torch.tensor([0.0, 2.0])
    assert explained_variance(returns, returns) == 1.0
    assert explained_variance(torch.tensor([1.0, 1.0]), returns) == pytest.approx(0.0)
    assert math.isnan(explained_variance(torch.zeros(2), torch.ones(2)))
