"""The gradient diagnostics of `benchmarks/research/diagnostics.py`: the noise scale by hand, and per-episode gradients linear in their advantages."""

import sys
from pathlib import Path

import pytest
import torch

from chess_sim.config import CompactConfig
from chess_sim.policy.base import Normalizer, noise_schedule
from chess_sim.policy.compact import CompactPolicy
from chess_sim.rl.flow_rl import FlowRL, RolloutSpec

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "research"))
from diagnostics import episode_gradients, gradient_noise_scale  # noqa: E402

SIGMAS = noise_schedule(0.2, 0.02, 3)[:, None].expand(3, 6)
SCORED = RolloutSpec(sigmas=SIGMAS, scored=True)


def test_gradient_noise_scale_by_hand():
    # Two episodes with gradients (1, 0) and (3, 0): |G|^2 = (|g1 + g2|^2 - |g1|^2 - |g2|^2) / 2 = (16 - 10) / 2
    # = 3; tr(Sigma) = sample variance of 1 and 3 = 2; B = 2 / 3; the halves point the same way.
    result = gradient_noise_scale(torch.tensor([[1.0, 0.0], [3.0, 0.0]]))
    assert result["signal_sq"] == pytest.approx(3.0) and result["noise_trace"] == pytest.approx(2.0)
    assert result["noise_scale_episodes"] == pytest.approx(2 / 3) and result["halves_cosine"] == pytest.approx(1.0)
    opposite = gradient_noise_scale(torch.tensor([[1.0, 0.0], [-1.0, 0.0]]))
    assert opposite["signal_sq"] < 0 and opposite["noise_scale_episodes"] is None


def test_episode_gradients_scale_with_the_advantage_and_vanish_without():
    torch.manual_seed(0)
    model = FlowRL(CompactPolicy(CompactConfig(width=32, layers=1, heads=2, image_size=32, steps=3),
                                 Normalizer.identity()).eval())
    images = torch.rand(2, 3, 32, 32)
    batch = {"observation.images.front": images, "observation.images.wrist": images, "observation.state": torch.zeros(2, 6),
             "task": ["Move the white pawn from e2 to e4.", "Move the black knight from g8 to f6."]}
    sample = model.sample(batch, torch.randn(2, 50, 6), torch.randn(2, 3, 50, 6), None, SCORED)
    episode = (sample.chain, sample.prefix, batch["observation.state"])
    gradients = episode_gradients(model, SIGMAS, [(*episode, torch.ones(2)), (*episode, torch.full((2,), 2.0)),
                                          (*episode, torch.zeros(2))], slice(0, 3))
    assert gradients.shape[0] == 3 and gradients[0].norm() > 0
    assert torch.allclose(gradients[1], 2 * gradients[0], rtol=1e-4, atol=1e-6) and not gradients[2].any()


def test_episode_gradients_leave_out_the_actions_a_decision_does_not_execute():
    torch.manual_seed(0)
    policy = CompactPolicy(CompactConfig(width=32, layers=1, heads=2, image_size=32, steps=3), Normalizer.identity())
    policy.eval().set_action_steps(10)
    model = FlowRL(policy)
    images = torch.rand(1, 3, 32, 32)
    batch = {"observation.images.front": images, "observation.images.wrist": images,
             "observation.state": torch.zeros(1, 6), "task": ["Move the white pawn from e2 to e4."]}
    sample = model.sample(batch, torch.randn(1, 50, 6), torch.randn(1, 3, 50, 6), None, SCORED)
    unexecuted, executed = sample.chain.clone(), sample.chain.clone()
    unexecuted[:, -1, 10:] += 1.0  # the end of the chunk, which the environment never sees
    executed[:, -1, :10] += 1.0
    gradients = episode_gradients(model, SIGMAS, [(chain, sample.prefix, batch["observation.state"], torch.ones(1))
                                          for chain in (sample.chain, unexecuted, executed)], slice(0, 3))
    assert torch.allclose(gradients[0], gradients[1]) and not torch.allclose(gradients[0], gradients[2])
