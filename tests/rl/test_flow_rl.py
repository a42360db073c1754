"""FlowRL over the compact policy: the chain's likelihood re-evaluated from storage, the noise-free chain, the
learned start (`rl --steer`) with its spread exploration, and the elements a shorter executed chunk leaves out."""

import math

import pytest
import torch

from chess_sim.config import StartConfig
from chess_sim.policy.base import cast_prefix, noise_schedule, sample_chain, sample_chunk
from chess_sim.policy.start import SteeredPolicy
from chess_sim.rl.flow_rl import FlowRL, RolloutSpec

from rl_helpers import SMALL, batch_of, small_policy

SIGMAS = noise_schedule(0.2, 0.002, SMALL.steps)[:, None].expand(SMALL.steps, 6).clone()
SCORED = RolloutSpec(sigmas=SIGMAS, scored=True)


@pytest.fixture()
def model():
    return FlowRL(small_policy(), critic_width=16)


def steered_model(policy, std=0.5, spread_noise=0.0):
    """FlowRL with a learned start whose spread is `std` everywhere."""
    model = FlowRL(policy, StartConfig(steer=True), spread_noise, critic_width=16).eval()
    with torch.no_grad():
        model.start.log_std.fill_(math.log(std))
    return model


@pytest.mark.parametrize("time_power", [1, 2])
def test_reevaluated_log_probs_equal_the_rollout(model, time_power):
    model.policy.set_sampler(SMALL.steps, time_power)
    batch = batch_of(2)
    sample = model.sample(batch, torch.randn(2, 50, 6), torch.randn(2, SMALL.steps, 50, 6), None, SCORED)
    assert sample.chain.shape == (2, SMALL.steps + 1, 50, 6) and sample.log_probs.shape == (2, SMALL.steps, 50, 6)
    with torch.no_grad():
        log_probs = model.evaluate(sample.chain, sample.prefix, SIGMAS)
        value = model.value(cast_prefix(sample.prefix, torch.float32), batch["observation.state"])
    # Float32 rounding differs between sampling (B rows) and re-evaluation (B*K rows); divided by the last
    # step's sigma 0.002 it reaches ~1e-4 nats, a ratio within 1e-3 of 1.
    assert float((log_probs - sample.log_probs).abs().max()) < 1e-3
    assert torch.allclose(value, sample.value, atol=1e-6)


def test_noise_free_chain_is_the_policy_sampler_and_keeps_nothing_else(model):
    batch, x0 = batch_of(2), torch.randn(2, 50, 6)
    sample = model.sample(batch, x0, torch.randn(2, SMALL.steps, 50, 6), None, RolloutSpec())
    with torch.no_grad():
        expected = sample_chunk(model.policy, model.policy.encode(batch), x0)
    assert torch.equal(sample.chain[:, -1], expected) and sample.log_probs is None
    assert model.actions(sample.chain).shape == (2, 50, 6)
    without_critic = FlowRL(model.policy).sample(batch, x0, None, None, RolloutSpec())
    assert without_critic.value is None and torch.equal(without_critic.chain, sample.chain)


def test_a_start_spread_replaces_the_policys_start(model):
    steered = steered_model(model.policy, std=0.5)
    batch, x0 = batch_of(2), torch.randn(2, 50, 6)
    own = steered.sample(batch, x0, None, None, RolloutSpec())
    wide = steered.sample(batch, x0, None, None, RolloutSpec(start_spread=1.0))
    assert torch.allclose(own.chain[:, 0], 0.5 * x0) and torch.equal(wide.chain[:, 0], x0)
    with pytest.raises(AssertionError, match="policy's own"):
        RolloutSpec(sigmas=SIGMAS, scored=True, start_spread=1.0)


def test_a_policy_executing_part_of_its_chunk_scores_only_what_reaches_the_environment(model):
    assert model.scored_mask() is None
    model.policy.set_action_steps(10)
    mask = model.scored_mask()
    assert mask.shape == (SMALL.steps, 50, 1) and int(mask.sum()) == SMALL.steps * 50 - 40  # the last transition's
    assert steered_model(model.policy).scored_mask().shape == (SMALL.steps + 1, 50, 1)


def test_a_policy_given_a_start_samples_exactly_as_before():
    policy = small_policy()
    wrapped = SteeredPolicy(policy)
    batch, x0 = batch_of(2), torch.randn(2, 50, 6)
    with torch.no_grad():
        before = sample_chain(policy, policy.encode(batch), x0)
        after = sample_chain(wrapped, wrapped.encode(batch), x0)
    assert torch.equal(before, after)


def test_a_policy_that_brought_its_start_keeps_it():
    policy = SteeredPolicy(small_policy())
    learning = FlowRL(policy, start=StartConfig(steer=True))
    assert learning.policy is policy and learning.start is policy.start
    frozen = FlowRL(policy)  # the start samples as saved, but is not trained
    assert frozen.start is None and not any(p is policy.start.log_std for p in frozen.policy_parameter_sets()["chain"])


def test_the_start_log_density_is_the_closed_form_gaussian(model):
    model = steered_model(model.policy, std=0.5)
    draw = torch.randn(2, 50, 6)
    sample = model.sample(batch_of(2), draw, torch.randn(2, SMALL.steps, 50, 6), None, SCORED)
    assert sample.log_probs.shape == (2, SMALL.steps + 1, 50, 6)
    assert torch.allclose(sample.chain[:, 0], 0.5 * draw, atol=1e-6)
    expected = -0.5 * draw ** 2 - math.log(0.5) - 0.5 * math.log(2 * math.pi)
    assert torch.allclose(sample.log_probs[:, 0], expected, atol=1e-5)


def test_steered_log_probs_reevaluate_and_the_start_alone_matches(model):
    model = steered_model(model.policy)
    sample = model.sample(batch_of(2), torch.randn(2, 50, 6), torch.randn(2, SMALL.steps, 50, 6), None, SCORED)
    with torch.no_grad():
        log_probs = model.evaluate(sample.chain, sample.prefix, SIGMAS)
        start_only = model.evaluate(sample.chain, sample.prefix, SIGMAS, transitions=sample.log_probs[:, 1:])
    assert float((log_probs - sample.log_probs).abs().max()) < 1e-3
    assert torch.equal(start_only[:, :1], log_probs[:, :1])
    assert torch.equal(start_only[:, 1:], sample.log_probs[:, 1:])


def test_spread_exploration_starts_each_decision_from_its_drawn_spread(model):
    model = steered_model(model.policy, std=0.5, spread_noise=0.3)
    draw, x0 = torch.randn(2, 1), torch.randn(2, 50, 6)
    sample = model.sample(batch_of(2), x0, torch.randn(2, SMALL.steps, 50, 6), draw, SCORED)
    drawn = math.log(0.5) + 0.3 * draw
    assert torch.allclose(sample.spread, drawn)
    std = drawn.exp()[:, :, None]
    assert torch.allclose(sample.chain[:, 0], std * x0, atol=1e-6)
    assert torch.allclose(sample.log_probs[:, 0], -0.5 * x0 ** 2 - std.log() - 0.5 * math.log(2 * math.pi), atol=1e-5)
    assert torch.allclose(sample.spread_log_probs, -0.5 * draw ** 2 - math.log(0.3) - 0.5 * math.log(2 * math.pi),
                          atol=1e-5)
    with torch.no_grad():  # without draws (validation, the self-check's noise-free chain): the learned spread
        plain = model.sample(batch_of(2), x0, None, None, RolloutSpec())
    assert plain.spread is None and torch.allclose(plain.chain[:, 0], 0.5 * x0, atol=1e-6)


def test_spread_exploration_needs_a_learned_start():
    with pytest.raises(AssertionError, match="learned start"):
        FlowRL(small_policy(), StartConfig(steer=False), spread_noise=0.3)


def test_the_spread_depends_on_the_observation_and_learns_with_its_head(model):
    model = steered_model(model.policy, spread_noise=0.3)
    head = model.start.head
    sets = model.policy_parameter_sets()
    assert sets["spread_head"] == list(head.parameters()) and sets["start_spread"] == [model.start.log_std]
    assert not any(p is q for p in model.start.parameters() for q in sets["chain"])
    batch, x0 = batch_of(2), torch.randn(2, 50, 6)
    with torch.no_grad():
        prefix = model.policy.encode(batch)
        assert torch.allclose(model.policy.start_log_spread(prefix), torch.full((2, 1), math.log(0.5)))
        head[-1].weight.normal_(0.0, 0.05)
        log_spread = model.policy.start_log_spread(prefix)
        assert log_spread.shape == (2, 1) and float((log_spread[0] - log_spread[1]).abs()) > 1e-3
        own = sample_chain(model.policy, prefix, x0)[:, 0]
    assert torch.allclose(own, log_spread.exp()[:, :, None] * x0, atol=1e-6)
    draw = torch.randn(2, 1)
    sample = model.sample(batch, x0, torch.randn(2, SMALL.steps, 50, 6), draw, SCORED)
    assert torch.allclose(sample.spread, log_spread + 0.3 * draw, atol=1e-6)
