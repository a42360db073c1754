"""A chain in a lower precision (`policy/precision.py`): float32 through the copy is the policy's own chain bit for
bit, bfloat16 is the same chain to its rounding, and the policy's weights are left as they were."""

import pytest
import torch

from chess_sim.config import CompactConfig
from chess_sim.policy.base import Normalizer, denoise
from chess_sim.policy.compact import CompactPolicy
from chess_sim.policy.precision import LoweredChain, lowered_chain


@pytest.fixture
def policy():
    torch.manual_seed(0)
    config = CompactConfig(image_size=32, width=64, layers=2, heads=2, steps=4)
    return CompactPolicy(config, Normalizer.identity()).eval()


def observations():
    generator = torch.Generator().manual_seed(0)
    return {"observation.images.front": torch.rand(2, 3, 32, 32, generator=generator),
            "observation.images.wrist": torch.rand(2, 3, 32, 32, generator=generator),
            "observation.state": torch.randn(2, 6, generator=generator),
            "task": ["Move the white knight from g1 to f3.", "Move the black pawn from e7 to e5."]}


def chain_end(runs_chain, policy):
    with torch.no_grad():
        prefix = policy.encode(observations())
        start = torch.randn(2, 50, 6, generator=torch.Generator().manual_seed(1))
        return denoise(runs_chain, prefix, start)[0][:, -1]


def test_a_float32_copy_runs_the_policys_own_chain_bit_for_bit(policy):
    assert torch.equal(chain_end(LoweredChain(policy, torch.float32), policy), chain_end(policy, policy))


def test_bfloat16_is_the_same_chain_to_its_rounding(policy):
    own, lowered = chain_end(policy, policy), chain_end(LoweredChain(policy, torch.bfloat16), policy)
    assert lowered.dtype == torch.float32
    difference = (own - lowered).abs()
    assert 0 < difference.max() < 0.1 and difference.mean() < 0.02
    # and far closer than another policy's chain
    torch.manual_seed(5)
    other = CompactPolicy(policy.config, Normalizer.identity()).eval()
    assert (own - chain_end(other, policy)).abs().mean() > 10 * difference.mean()


def test_the_policy_keeps_its_float32_weights(policy):
    before = {name: tensor.clone() for name, tensor in policy.state_dict().items()}
    lowered = lowered_chain(policy, "bfloat16")
    assert lowered.dtype == torch.bfloat16 and lowered.steps == policy.steps
    assert all(tensor.dtype == torch.float32 and torch.equal(tensor, before[name])
               for name, tensor in policy.state_dict().items())


def test_float32_needs_no_copy(policy):
    assert lowered_chain(policy, "float32") is None


def test_only_the_compact_policys_chain_is_lowered(policy):
    from chess_sim.policy.start import SteeredPolicy

    assert lowered_chain(SteeredPolicy(policy), "bfloat16").dtype == torch.bfloat16  # a learned start wraps it
    with pytest.raises(ValueError, match="a bfloat16 chain is built for the compact policy only"):
        lowered_chain(object(), "bfloat16")
    assert lowered_chain(object(), "float32") is None


def test_a_scored_rollout_keeps_the_policys_own_chain(policy):
    from chess_sim.policy.base import noise_schedule
    from chess_sim.rl.flow_rl import RolloutSpec

    sigmas = noise_schedule(0.2, 0.002, policy.steps)[:, None].expand(policy.steps, 6)
    with pytest.raises(AssertionError, match="log-probs describe the policy's own chain"):
        RolloutSpec(sigmas=sigmas, scored=True, lowered=lowered_chain(policy, "bfloat16"))
