"""PPO pieces against hand calculations: GAE, per-element clipped ratios, the Gaussian step log-prob; the storage's
episode index."""

import math

import pytest
import torch

from chess_sim.rl.flow_rl import gaussian_log_prob
from chess_sim.rl.ppo import LOG_RATIO_BOUND, approx_kl, clipped_policy_loss, gae, log_ratio
from chess_sim.rl.storage import Decision, Storage


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


def test_each_element_is_clipped_on_its_own():
    log_ratios = torch.log(torch.tensor([[1.5, 0.5, 1.0]]))
    up = clipped_policy_loss(log_ratios, torch.tensor([1.0]), clip=0.2)
    assert float(up["pg_loss"]) == pytest.approx(-(1.2 + 0.5 + 1.0) / 3)
    assert float(up["clipfrac"]) == pytest.approx(2 / 3)  # 1.5 and 0.5 are outside [0.8, 1.2]
    assert float(up["clip_active"]) == pytest.approx(1 / 3)  # only 1.5 is cut; 0.5 keeps its gradient
    down = clipped_policy_loss(log_ratios, torch.tensor([-1.0]), clip=0.2)
    assert float(down["pg_loss"]) == pytest.approx((1.5 + 0.8 + 1.0) / 3)
    assert float(down["clip_active"]) == pytest.approx(1 / 3)  # with a negative advantage only 0.5 is cut


def test_log_ratios_are_clamped_before_exp():
    far = torch.tensor([[100.0, 0.0]], requires_grad=True)
    terms = clipped_policy_loss(far, torch.tensor([-1.0]), clip=0.2)
    assert float(terms["pg_loss"]) == pytest.approx((math.exp(LOG_RATIO_BOUND) + 1.0) / 2)
    assert float(terms["approx_kl"]) == pytest.approx((math.exp(LOG_RATIO_BOUND) - 1.0 - LOG_RATIO_BOUND) / 2)
    terms["pg_loss"].backward()
    assert far.grad.tolist() == [[0.0, pytest.approx(0.5)]]  # the clamped element sends no gradient


def test_ratio_modes_sum_the_right_dimensions():
    new, old = torch.randn(2, 3, 4, 5), torch.randn(2, 3, 4, 5)
    assert log_ratio(new, old, "element").shape == (2, 3, 4, 5)
    assert torch.allclose(log_ratio(new, old, "step"), (new - old).sum(dim=(2, 3)))
    assert torch.allclose(log_ratio(new, old, "chunk"), (new - old).sum(dim=(1, 2, 3)))
    with pytest.raises(ValueError, match="ratio mode"):
        log_ratio(new, old, "token")


def test_a_scored_mask_keeps_only_its_elements():
    new, old = torch.arange(24.0).view(1, 2, 3, 4), torch.zeros(1, 2, 3, 4)
    scored = torch.tensor([[True, True, True], [True, False, False]])[:, :, None]
    assert log_ratio(new, old, "element", scored).tolist() == [list(range(16))]
    assert log_ratio(new, old, "step", scored).tolist() == [[66.0, 54.0]]  # 0..11, then 12..15
    assert log_ratio(new, old, "chunk", scored).tolist() == [120.0]


def test_approx_kl_is_zero_at_ratio_one_and_positive_otherwise():
    assert float(approx_kl(torch.zeros(10))) == 0.0
    assert float(approx_kl(torch.tensor([0.1, -0.1]))) == pytest.approx(((math.exp(0.1) - 1.1) + (math.exp(-0.1) - 0.9)) / 2, rel=1e-4)
    tiny = torch.tensor([1e-6, -2e-6, 3e-7, 5e-5])  # in float32, r - 1 rounds by more than these terms' size
    assert float(approx_kl(tiny)) == pytest.approx(float((tiny.double() ** 2 / 2).mean()), rel=1e-3)


def test_gaussian_step_log_prob_closed_form():
    value = gaussian_log_prob(torch.tensor(1.0), torch.tensor(0.0), torch.tensor(2.0))
    assert float(value) == pytest.approx(-0.5 * 0.25 - math.log(2.0) - 0.5 * math.log(2 * math.pi))


def test_storage_lists_each_episode_decisions():
    storage = Storage()
    decision = Decision(torch.zeros(2, 1, 1), torch.zeros(1, 1, 1), 0.0, torch.zeros(1), torch.zeros(1, 1))
    storage.add_episode([decision] * 3, bootstrap=0.0)
    storage.add_episode([decision], bootstrap=0.0)
    storage.add_episode([decision] * 2, bootstrap=0.0)
    assert storage.episodes() == [[0, 1, 2], [3], [4, 5]]
