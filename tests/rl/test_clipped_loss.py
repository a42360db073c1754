"""PPO's per-element clipped surrogate, the clamp of the log ratios, the scored elements and the approximate KL,
against hand calculations."""

import math

import pytest
import torch

from chess_sim.rl.clipped_loss import LOG_RATIO_BOUND, approx_kl, clipped_policy_loss, element_log_ratios
from chess_sim.rl.flow_rl import gaussian_log_prob


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
    assert float(terms["pg_loss"].detach()) == pytest.approx((math.exp(LOG_RATIO_BOUND) + 1.0) / 2)
    assert float(terms["kl"]) == pytest.approx((math.exp(LOG_RATIO_BOUND) - 1.0 - LOG_RATIO_BOUND) / 2)
    terms["pg_loss"].backward()
    assert far.grad.tolist() == [[0.0, pytest.approx(0.5)]]  # the clamped element sends no gradient


def test_a_scored_mask_keeps_only_its_elements():
    new, old = torch.arange(24.0).view(1, 2, 3, 4), torch.zeros(1, 2, 3, 4)
    scored = torch.tensor([[True, True, True], [True, False, False]])[:, :, None]
    assert element_log_ratios(new, old, scored).tolist() == [list(range(16))]
    assert torch.equal(element_log_ratios(new, old), new)


def test_approx_kl_is_zero_at_ratio_one_and_positive_otherwise():
    assert float(approx_kl(torch.zeros(10))) == 0.0
    expected = ((math.exp(0.1) - 1.1) + (math.exp(-0.1) - 0.9)) / 2
    assert float(approx_kl(torch.tensor([0.1, -0.1]))) == pytest.approx(expected, rel=1e-4)
    tiny = torch.tensor([1e-6, -2e-6, 3e-7, 5e-5])  # in float32, r - 1 rounds by more than these terms' size
    assert float(approx_kl(tiny)) == pytest.approx(float((tiny.double() ** 2 / 2).mean()), rel=1e-3)


def test_gaussian_step_log_prob_closed_form():
    value = gaussian_log_prob(torch.tensor(1.0), torch.tensor(0.0), torch.tensor(2.0))
    assert float(value) == pytest.approx(-0.5 * 0.25 - math.log(2.0) - 0.5 * math.log(2 * math.pi))
