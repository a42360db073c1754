"""FlowRL over the compact policy: likelihood consistency (and the self-check of `rl/check.py`), the noise-free
chain, critic warm-up, the learned start (`rl --steer`) and its spread exploration."""

import copy
import math

import pytest
import torch

from chess_sim.config import CompactConfig, NoiseConfig, PPOConfig, StartConfig
from chess_sim.policy.base import Normalizer, sample_chain, sample_chunk
from chess_sim.policy.compact import CompactPolicy
from chess_sim.rl.check import log_prob_tolerance, self_check
from chess_sim.rl.flow_rl import FlowRL
from chess_sim.policy.start import SteeredPolicy
from chess_sim.rl.ppo import ppo_update
from chess_sim.rl.storage import Decision, Storage, split_prefix

SMALL = CompactConfig(width=32, layers=1, heads=2, image_size=32, steps=4)


def batch_of(size, seed=0):
    generator = torch.Generator().manual_seed(seed)
    images = lambda: torch.rand(size, 3, 48, 48, generator=generator)  # noqa: E731
    return {"observation.images.front": images(), "observation.images.wrist": images(),
            "observation.state": torch.randn(size, 6, generator=generator) * 10,
            "task": ["Move the white pawn from e2 to e4.", "Move the black knight from g8 to f6."][:size] * (size // 2 or 1)}


@pytest.fixture()
def model():
    torch.manual_seed(0)
    return FlowRL(CompactPolicy(SMALL, Normalizer.identity()).eval(), NoiseConfig(learn_sigma=True))


@pytest.mark.parametrize("time_power", [1, 2])
def test_reevaluated_log_probs_equal_the_rollout(model, time_power):
    model.policy.set_sampler(SMALL.steps, time_power)
    batch = batch_of(2)
    x0, noise = torch.randn(2, 50, 6), torch.randn(2, SMALL.steps, 50, 6)
    sample = model.sample(batch, x0, noise)
    assert sample.chain.shape == (2, SMALL.steps + 1, 50, 6) and sample.log_probs.shape == (2, SMALL.steps, 50, 6)
    with torch.no_grad():
        log_probs, value = model.evaluate(sample.chain, sample.prefix, batch["observation.state"])
    # Float32 rounding differs between sampling (B rows) and re-evaluation (B*K rows); divided by the last
    # step's sigma 0.002 it reaches ~1e-4 nats, a ratio within 1e-3 of 1.
    assert float((log_probs - sample.log_probs).abs().max()) < 1e-3
    assert torch.allclose(value, sample.value, atol=1e-6)


def test_noise_free_chain_is_the_policy_sampler(model):
    batch = batch_of(2)
    x0 = torch.randn(2, 50, 6)
    sample = model.sample(batch, x0, None)
    with torch.no_grad():
        expected = sample_chunk(model.policy, model.policy.encode(batch), x0)
    assert torch.equal(sample.chain[:, -1], expected)
    assert model.actions(sample.chain).shape == (2, 50, 6)


def test_sigma_schedule_runs_from_start_to_end(model):
    sigmas = model.sigmas().detach()
    assert sigmas.shape == (SMALL.steps, 6)
    assert float(sigmas[0, 0]) == pytest.approx(0.2) and float(sigmas[-1, 0]) == pytest.approx(0.002)


def _storage(model, episodes=2, reward=lambda i, episode, sample: float(i + episode)):
    storage = Storage()
    for episode in range(episodes):
        batch = batch_of(2, seed=episode)
        draw = torch.randn(2, 1) if model.explores_spread else None
        sample = model.sample(batch, torch.randn(2, 50, 6), torch.randn(2, SMALL.steps, 50, 6), draw)
        prefixes = split_prefix(sample.prefix, 2)
        drawn = sample.spread is not None
        decisions = [Decision(sample.chain[i], sample.log_probs[i], float(sample.value[i]),
                              batch["observation.state"][i], prefixes[i], reward=reward(i, episode, sample),
                              spread=sample.spread[i] if drawn else None,
                              spread_log_prob=sample.spread_log_probs[i] if drawn else None) for i in range(2)]
        storage.add_episode(decisions, bootstrap=0.0)
    storage.finish(0.99, 0.95)
    return storage


def test_critic_warmup_leaves_policy_and_noise_untouched(model):
    storage = _storage(model)
    policy_before = {k: v.clone() for k, v in model.policy.state_dict().items()}
    sigma_before = model.log_sigma.detach().clone()
    critic_before = [p.detach().clone() for p in model.critic.parameters()]
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    stats = ppo_update(model, storage, optimizer, PPOConfig(epochs=1, minibatch=2), torch.Generator().manual_seed(0),
                       critic_only=True)
    assert all(torch.equal(policy_before[k], v) for k, v in model.policy.state_dict().items())
    assert torch.equal(model.log_sigma.detach(), sigma_before)
    assert any(not torch.equal(a, b) for a, b in zip(critic_before, model.critic.parameters()))
    assert stats["epochs_done"] == 1


def test_an_update_moves_the_policy_and_reports_its_statistics(model):
    storage = _storage(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    stats = ppo_update(model, storage, optimizer, PPOConfig(epochs=2, minibatch=2, target_kl=0.0),
                       torch.Generator().manual_seed(0))
    for key in ("pg_loss", "v_loss", "approx_kl", "clipfrac", "grad_norm", "explained_variance"):
        assert key in stats
    assert stats["epochs_done"] == 2 and not stats["kl_stop"]
    chain, prefix, state, old = storage.minibatch(torch.arange(len(storage)))
    with torch.no_grad():
        new, _ = model.evaluate(chain, prefix, state)
    assert float((new - old).abs().max()) > 1e-4


def test_a_policy_executing_part_of_its_chunk_learns_from_that_part_alone(model):
    model.policy.set_action_steps(10)
    storage = _storage(model)
    assert model.scored_mask().sum() == SMALL.steps * 50 - 40  # the last transition's last 40 steps
    flow = FlowRL(model.policy, likelihood="flow")  # every flow draw scores the chunk itself: 10 steps each
    assert flow.scored_mask().sum(dim=(1, 2)).tolist() == [10] * flow.flow_draws
    ignored = copy.deepcopy(storage)  # the same decisions, the last transition's unexecuted log-probs scrambled
    for decision in ignored.decisions:
        decision.log_probs[-1, 10:] = torch.randn_like(decision.log_probs[-1, 10:]) * 100
    weights = []
    for stored in (storage, ignored):
        trained = copy.deepcopy(model)
        optimizer = torch.optim.AdamW(trained.parameters(), lr=1e-3)
        ppo_update(trained, stored, optimizer, PPOConfig(epochs=1, minibatch=2), torch.Generator().manual_seed(0))
        weights.append(trained.policy.state_dict())
    assert all(torch.equal(weights[0][key], weights[1][key]) for key in weights[0])
    checks = [self_check(model, stored, {"chain": 1e-5}, clip=0.2) for stored in (storage, ignored)]
    assert all(checks[0][key] == checks[1][key] for key in checks[0] if key.startswith(("shift_", "outside_clip_")))
    moved = model.policy.state_dict()
    assert any(not torch.equal(moved[key], weights[0][key]) for key in moved)
    earlier = copy.deepcopy(storage)  # an earlier transition's unexecuted elements shape the executed actions
    for decision in earlier.decisions:
        decision.log_probs[0, 10:] += 1.0
    trained = copy.deepcopy(model)
    ppo_update(trained, earlier, torch.optim.AdamW(trained.parameters(), lr=1e-3), PPOConfig(epochs=1, minibatch=2),
               torch.Generator().manual_seed(0))
    assert any(not torch.equal(weights[0][key], value) for key, value in trained.policy.state_dict().items())


def test_check_tolerance_is_the_rounding_allowance_over_the_smallest_sigma(model):
    assert log_prob_tolerance(model) == pytest.approx(1e-5 / 0.002)
    assert log_prob_tolerance(FlowRL(model.policy, NoiseConfig(sigma_end=0.02))) == pytest.approx(1e-5 / 0.02)


def test_check_passes_a_fresh_rollout_and_fails_a_likelihood_mismatch(model):
    model.eval()
    storage = _storage(model)
    assert self_check(model, storage, {"chain": 1e-5}, clip=0.2)["passed"]
    for decision in storage.decisions:
        decision.log_probs = decision.log_probs + 0.01  # twice the 5e-3 nats tolerance
    result = self_check(model, storage, {"chain": 1e-5}, clip=0.2)
    assert not result["passed"] and result["log_prob_max_abs_diff"] == pytest.approx(0.01, abs=1e-3)


def steered_model(policy, std=0.5, spread_noise=0.0):
    """FlowRL with a learned start whose spread is `std` everywhere."""
    model = FlowRL(policy, NoiseConfig(sigma_start=0.2, sigma_end=0.02),
                   StartConfig(steer=True, spread_noise=spread_noise)).eval()
    with torch.no_grad():
        model.start.log_std.fill_(math.log(std))
    return model


def test_a_policy_given_a_start_samples_exactly_as_before():
    policy = CompactPolicy(SMALL, Normalizer.identity()).eval()
    wrapped = SteeredPolicy(policy)
    batch, x0 = batch_of(2), torch.randn(2, 50, 6)
    with torch.no_grad():
        before = sample_chain(policy, policy.encode(batch), x0)
        after = sample_chain(wrapped, wrapped.encode(batch), x0)
    assert torch.equal(before, after)


def test_a_policy_that_brought_its_start_keeps_it():
    policy = SteeredPolicy(CompactPolicy(SMALL, Normalizer.identity()).eval())
    learning = FlowRL(policy, start=StartConfig(steer=True))
    assert learning.policy is policy and learning.start is policy.start
    frozen = FlowRL(policy)  # the start samples as saved, but is not trained
    assert frozen.start is None and not any(p is policy.start.log_std for p in frozen.policy_parameter_sets()["chain"])


def test_the_start_log_density_is_the_closed_form_gaussian(model):
    model = steered_model(model.policy, std=0.5)
    draw = torch.randn(2, 50, 6)
    sample = model.sample(batch_of(2), draw, torch.randn(2, SMALL.steps, 50, 6))
    assert sample.log_probs.shape == (2, SMALL.steps + 1, 50, 6)
    assert torch.allclose(sample.chain[:, 0], 0.5 * draw, atol=1e-6)
    expected = -0.5 * draw ** 2 - math.log(0.5) - 0.5 * math.log(2 * math.pi)
    assert torch.allclose(sample.log_probs[:, 0], expected, atol=1e-5)


def test_steered_log_probs_reevaluate_and_the_start_alone_matches(model):
    model = steered_model(model.policy)
    batch = batch_of(2)
    sample = model.sample(batch, torch.randn(2, 50, 6), torch.randn(2, SMALL.steps, 50, 6))
    state = batch["observation.state"]
    with torch.no_grad():
        log_probs, value = model.evaluate(sample.chain, sample.prefix, state)
        start_only, start_value = model.evaluate(sample.chain, sample.prefix, state,
                                                 transitions=sample.log_probs[:, 1:])
    assert float((log_probs - sample.log_probs).abs().max()) < 1e-3
    assert torch.equal(start_only[:, :1], log_probs[:, :1]) and torch.equal(start_value, value)
    assert torch.equal(start_only[:, 1:], sample.log_probs[:, 1:])


def test_a_start_only_update_equals_the_full_one_and_leaves_the_chain(model):
    model = steered_model(model.policy)
    storage = _storage(model)
    results = []
    # chain_trains False re-evaluates the start alone, True the whole chain; with the chain's lr 0 (and no gradient
    # clip: the full path's chain gradients would enter the clipped norm) both must give the same update
    for chain_trains in (False, True):
        twin = copy.deepcopy(model)
        lrs = {"chain": 0.0, "start_spread": 1e-2, "spread_head": 1e-2}
        groups = [{"params": params, "lr": lrs[name]} for name, params in twin.policy_parameter_sets().items()]
        optimizer = torch.optim.AdamW([*groups, {"params": list(twin.critic.parameters()), "lr": 1e-3}],
                                      weight_decay=0.0)
        before = {k: v.clone() for k, v in twin.policy.state_dict().items()}
        cfg = PPOConfig(epochs=2, minibatch=2, target_kl=0.0, lr=0.0, max_grad_norm=1e9)
        stats = ppo_update(twin, storage, optimizer, cfg, torch.Generator().manual_seed(0), chain_trains=chain_trains)
        after = twin.policy.state_dict()
        assert all(torch.equal(before[k], after[k]) for k in before if not k.startswith("start."))
        assert not torch.equal(before["start.log_std"], after["start.log_std"])
        results.append((stats, after))
    (fast, fast_state), (full, full_state) = results
    assert fast["pg_loss"] == pytest.approx(full["pg_loss"], abs=1e-4)
    assert all(torch.allclose(fast_state[k], full_state[k], atol=1e-5) for k in fast_state)


def test_the_self_check_update_moves_a_steered_start_at_its_own_lrs(model):
    model = steered_model(model.policy)
    storage = _storage(model)
    still, moved = (self_check(model, storage, {"chain": 0.0, "start_spread": lr, "spread_head": 0.0}, clip=0.2)
                    for lr in (0.0, 1e-2))
    assert still["passed"] and moved["passed"] and moved["update_lrs"]["start_spread"] == 1e-2
    assert still["shift_element_max_nats"] <= still["log_prob_tolerance"] < moved["shift_element_max_nats"]


def test_spread_exploration_starts_each_decision_from_its_drawn_spread(model):
    model = steered_model(model.policy, std=0.5, spread_noise=0.3)
    draw, x0 = torch.randn(2, 1), torch.randn(2, 50, 6)
    sample = model.sample(batch_of(2), x0, torch.randn(2, SMALL.steps, 50, 6), draw)
    drawn = math.log(0.5) + 0.3 * draw
    assert torch.allclose(sample.spread, drawn)
    std = drawn.exp()[:, :, None]
    assert torch.allclose(sample.chain[:, 0], std * x0, atol=1e-6)
    assert torch.allclose(sample.log_probs[:, 0], -0.5 * x0 ** 2 - std.log() - 0.5 * math.log(2 * math.pi), atol=1e-5)
    assert torch.allclose(sample.spread_log_probs, -0.5 * draw ** 2 - math.log(0.3) - 0.5 * math.log(2 * math.pi),
                          atol=1e-5)
    with torch.no_grad():  # without draws (validation, the self-check's noise-free chain): the learned spread
        plain = model.sample(batch_of(2), x0, None)
    assert plain.spread is None and torch.allclose(plain.chain[:, 0], 0.5 * x0, atol=1e-6)


def test_drawn_spreads_reevaluate_and_pass_the_self_check(model):
    model = steered_model(model.policy, spread_noise=0.3)
    storage = _storage(model)
    index = torch.arange(len(storage))
    chain, prefix, state, old = storage.minibatch(index)
    drawn, old_spread = storage.spreads(index)
    with torch.no_grad():
        new, _ = model.evaluate(chain, prefix, state, drawn)
        assert torch.allclose(model.spread_log_probs(drawn, prefix), old_spread)
    assert float((new - old).abs().max()) < 1e-3
    assert self_check(model, storage, {"chain": 0.0, "start_spread": 1e-2, "spread_head": 0.0}, clip=0.2)["passed"]


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_ppo_moves_the_spread_towards_the_draws_that_paid(model, sign):
    """Rewards that grow (sign 1) or shrink (-1) with each decision's drawn log-spread: one update moves the
    learned spread the same way."""
    model = steered_model(model.policy, std=0.5, spread_noise=0.3)
    storage = _storage(model, episodes=8, reward=lambda i, episode, sample: sign * float(sample.spread[i, 0]))
    optimizer = torch.optim.Adam([{"params": [model.start.log_std], "lr": 1e-2},
                                  {"params": list(model.critic.parameters()), "lr": 0.0}])
    cfg = PPOConfig(epochs=2, minibatch=4, target_kl=0.0, lr=0.0)
    stats = ppo_update(model, storage, optimizer, cfg, torch.Generator().manual_seed(0), chain_trains=False)
    assert sign * (float(model.start.log_std.detach()) - math.log(0.5)) > 0.005
    assert stats["spread_kl"] > 0.0  # the second epoch sees the first epoch's move


def test_spread_exploration_needs_a_learned_start():
    model = FlowRL(CompactPolicy(SMALL, Normalizer.identity()), start=StartConfig(steer=False, spread_noise=0.3))
    assert not model.explores_spread and model.start is None


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
    sample = model.sample(batch, x0, torch.randn(2, SMALL.steps, 50, 6), draw)
    assert torch.allclose(sample.spread, log_spread + 0.3 * draw, atol=1e-6)
