"""The compact policy against the FlowPolicy protocol: shapes, normalisation, save/load, sampler, learning."""

import pytest
import torch

from chess_sim.policy.base import (FlowPolicy, Normalizer, flow_matching_errors, flow_matching_loss, sample_chunk,
                                   time_deltas, time_grid)
from chess_sim.config import CompactConfig
from chess_sim.policy.compact import CompactPolicy, square_features, tokenize_instruction

SMALL = CompactConfig(image_size=32, width=32, layers=1, heads=2)


def batch(size=2, pixels=48):
    generator = torch.Generator().manual_seed(0)
    return {
        "observation.images.front": torch.rand(size, 3, pixels, pixels, generator=generator),
        "observation.images.wrist": torch.rand(size, 3, pixels, pixels, generator=generator),
        "observation.state": torch.randn(size, 6, generator=generator) * 30.0,
        "task": ["Move the white knight from g1 to f3.", "Move the black pawn from e7 to e5."][:size],
    }


@pytest.fixture
def policy():
    torch.manual_seed(0)
    stats = {"observation.state": {"mean": [0.0] * 5 + [50.0], "std": [30.0] * 5 + [20.0]},
             "action": {"mean": [1.0] * 6, "std": [2.0] * 5 + [0.0]}}
    return CompactPolicy(SMALL, Normalizer.from_stats(stats)).eval()


def test_protocol_shapes_and_dtypes(policy):
    assert isinstance(policy, FlowPolicy)
    prefix = policy.encode(batch())
    assert prefix["tokens"].shape == (2, 2 * 4 + 1 + 4, 32)
    x = torch.randn(2, 50, 6)
    v = policy.velocity(prefix, x, torch.full((2,), 0.5))
    assert v.shape == (2, 50, 6) and v.dtype == torch.float32
    assert policy.features(prefix).shape == (2, 32)


def test_normalisation_round_trip_and_zero_std_guard(policy):
    action = torch.randn(4, 50, 6) * 10 + 3
    back = policy.normalizer.unnormalize_action(policy.normalizer.normalize_action(action))
    assert torch.allclose(back, action, atol=1e-5)
    assert policy.normalizer.action_std[5] == pytest.approx(Normalizer.MIN_STD)
    assert torch.allclose(policy.normalizer.normalize_state(torch.tensor([[0.0] * 5 + [70.0]])),
                          torch.tensor([[0.0] * 5 + [1.0]]))


def test_save_load_round_trip_is_bit_exact(policy, tmp_path):
    policy.save(tmp_path)
    loaded = CompactPolicy.load(tmp_path)
    for (name, a), (_, b) in zip(policy.state_dict().items(), loaded.state_dict().items()):
        assert torch.equal(a, b), name
    x0 = torch.randn(2, 50, 6, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        out_a = sample_chunk(policy, policy.encode(batch()), x0)
        out_b = sample_chunk(loaded, loaded.encode(batch()), x0)
    assert torch.equal(out_a, out_b)
    assert loaded.normalizer.to_dict() == policy.normalizer.to_dict()


def test_load_refuses_a_non_policy_directory(tmp_path):
    with pytest.raises(ValueError, match="not a policy directory"):
        CompactPolicy.load(tmp_path)


def test_sampler_is_euler_from_one_to_zero(policy):
    assert torch.allclose(time_grid(4), torch.tensor([1.0, 0.75, 0.5, 0.25, 0.0]))
    prefix = policy.encode(batch())
    x0 = torch.randn(2, 50, 6)
    steps = policy.steps
    with torch.no_grad():
        x = x0.clone()
        for k in range(steps):
            x = x - (1.0 / steps) * policy.velocity(prefix, x, torch.full((2,), 1.0 - k / steps))
        assert torch.allclose(sample_chunk(policy, prefix, x0), x, atol=1e-5)


def test_the_squared_grid_takes_its_small_steps_at_the_action_end():
    assert torch.allclose(time_grid(4, power=2), torch.tensor([1.0, 0.5625, 0.25, 0.0625, 0.0]))
    assert time_deltas(4, 2) == pytest.approx([-0.4375, -0.3125, -0.1875, -0.0625])
    assert time_deltas(4) == [-0.25] * 4  # the uniform grid multiplies by -1/K exactly, as LeRobot does


def test_set_sampler_changes_the_chain_and_is_saved(policy, tmp_path):
    prefix, x0 = policy.encode(batch()), torch.randn(2, 50, 6)
    policy.set_sampler(3, 2)
    grid = time_grid(3, power=2)
    with torch.no_grad():
        x = x0.clone()
        for k in range(3):
            x = x + (grid[k + 1] - grid[k]) * policy.velocity(prefix, x, grid[k].expand(2))
        assert torch.allclose(sample_chunk(policy, prefix, x0), x, atol=1e-5)
    policy.save(tmp_path)
    loaded = CompactPolicy.load(tmp_path)
    assert (loaded.steps, loaded.time_power) == (3, 2)
    with pytest.raises(ValueError, match="time_power"):
        policy.set_sampler(3, 0)


def test_instruction_tokens_and_bad_instruction():
    assert tokenize_instruction(["Move the black pawn from e7 to e5."]).tolist() == [[1, 0, 52, 36]]
    with pytest.raises(ValueError, match="does not follow"):
        tokenize_instruction(["Put the knight somewhere."])


def test_a_few_flow_matching_steps_lower_the_loss(policy):
    torch.manual_seed(0)
    policy.train()
    data = batch()
    actions = torch.randn(2, 50, 6)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=3e-3)
    noise, t = torch.randn(2, 50, 6), torch.rand(2)

    def loss():
        return flow_matching_loss(policy, policy.encode(data), actions, noise, t)

    first = loss().item()
    for _ in range(30):
        optimizer.zero_grad()
        value = loss()
        value.backward()
        optimizer.step()
    assert loss().item() < 0.5 * first


def test_an_anchored_error_has_the_gradient_of_the_error_plus_the_weighted_distance_to_the_reference(policy):
    torch.manual_seed(1)
    reference = CompactPolicy(policy.config, Normalizer.identity()).eval()  # other weights, the same prefix format
    prefix = policy.encode(batch())
    actions, noise, t, weight = torch.randn(2, 50, 6), torch.randn(2, 50, 6), torch.rand(2), 0.7

    def gradient(loss):
        policy.zero_grad()
        loss.backward(retain_graph=True)
        return torch.cat([p.grad.flatten() for p in policy.parameters() if p.grad is not None])

    anchored = gradient((1 + weight) * flow_matching_errors(policy, prefix, actions, noise, t,
                                                            (reference, weight)).sum())
    x_t = t[:, None, None] * noise + (1 - t[:, None, None]) * actions
    by_hand = ((policy.velocity(prefix, x_t, t) - (noise - actions)) ** 2
               + weight * (policy.velocity(prefix, x_t, t) - reference.velocity(prefix, x_t, t).detach()) ** 2)
    expected = gradient(by_hand.sum())
    assert (anchored - expected).abs().max() < 1e-5 * expected.abs().max()  # float32 sums of ~2000 terms
    assert all(p.grad is None for p in reference.parameters())


def test_square_features_place_squares_on_the_board_grid():
    features = square_features(torch.tensor([0, 63, 28]))  # a1, h8, e4
    assert features.shape == (3, 14)
    assert torch.allclose(features[0, :2], torch.tensor([-1.0, -1.0]))
    assert torch.allclose(features[1, :2], torch.tensor([1.0, 1.0]))
    assert torch.allclose(features[2, :2], torch.tensor([1 / 7, -1 / 7]))
    # frequency 1 at a corner: sin(-pi) = 0, cos(-pi) = -1 for file and rank alike
    assert torch.allclose(features[0, 2:6], torch.tensor([0.0, 0.0, -1.0, -1.0]), atol=1e-6)


@pytest.mark.parametrize("grad", [False, True])
def test_a_prepared_chain_gives_the_modules_velocity_bit_for_bit(grad):
    """The cross-attention keys and values computed once per chain replace the decoder's own projections."""
    torch.manual_seed(1)
    policy = CompactPolicy(CompactConfig(image_size=32, width=32, layers=2, heads=4)).train(grad)
    with torch.set_grad_enabled(grad):
        prefix = policy.encode(batch(size=2))
        x, t = torch.randn(2, 50, 6), torch.tensor([0.9, 0.3])
        plain = policy.velocity(prefix, x, t)
        prepared = policy.velocity(policy.prepare_chain(prefix), x, t)
    assert torch.equal(plain, prepared)
    if grad:
        first = torch.autograd.grad(plain.square().sum(), list(policy.expert.parameters()))
        second = torch.autograd.grad(prepared.square().sum(), list(policy.expert.parameters()))
        assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(first, second))


def test_a_prepared_chain_below_float32_computes_the_modules_attention():
    """Outside float32 the velocity's attention is `_lowered_attention`'s; in float64 it must agree with the
    decoder's own layers to float64's rounding (heads, scaling and projections all in place)."""
    torch.manual_seed(1)
    policy = CompactPolicy(CompactConfig(image_size=32, width=32, layers=2, heads=4)).eval()
    with torch.no_grad():
        prefix = {name: value.double() for name, value in policy.encode(batch(size=2)).items()}
        policy.double()  # the encoder reads float32 images
        x, t = torch.randn(2, 50, 6, dtype=torch.float64), torch.tensor([0.9, 0.3])
        plain = policy.velocity(prefix, x, t)
        lowered = policy.velocity(policy.prepare_chain(prefix), x, t)
    assert lowered.dtype == torch.float64 and not torch.equal(plain, lowered)  # another route to the same values
    assert torch.allclose(plain, lowered, rtol=0, atol=1e-12)


def test_a_policy_for_captures_reads_the_captured_piece_and_others_refuse_captures(policy):
    capture = "Capture the black bishop on c5 with the white knight from d3."
    quiet = "Move the white knight from d3 to c5."
    assert tokenize_instruction([quiet, capture], captures=True).tolist() == [[0, 1, 19, 34, 0], [0, 1, 19, 34, 3]]
    with pytest.raises(ValueError, match="reads no captures"):
        policy.encode({**batch(size=1), "task": [capture]})
    torch.manual_seed(0)
    reader = CompactPolicy(CompactConfig(image_size=32, width=32, layers=1, heads=2, captures=1)).eval()
    prefix = reader.encode({**batch(size=2), "task": [quiet, capture]})
    assert prefix["tokens"].shape == (2, 2 * 4 + 1 + 5, 32)
    same_images = reader.encode({**batch(size=2), "task": [capture, capture]})
    assert not torch.equal(prefix["task"][0], same_images["task"][0])  # the captured piece changes the task vector
