"""The flow surrogate of PPO (`likelihood="flow"`, FPO): its elements against a hand calculation, the noise-free
rollout chain, re-evaluation from storage (and the self-check), the direction of an update, and its config."""

import json

import pytest
import torch

from chess_sim.config import PPOConfig, RLConfig, TrainConfig, replace_fields
from chess_sim.policy.base import Normalizer, sample_chunk
from chess_sim.policy.compact import CompactPolicy
from chess_sim.rl.check import self_check
from chess_sim.rl.flow_rl import FlowRL
from chess_sim.rl.ppo import ppo_update
from chess_sim.rl.storage import Decision, Storage, split_prefix

from test_flow_rl import SMALL, batch_of


@pytest.fixture()
def model():
    torch.manual_seed(0)
    return FlowRL(CompactPolicy(SMALL, Normalizer.identity()), likelihood="flow", flow_draws=3).eval()


def test_draws_have_the_surrogate_shapes_and_training_time_distribution(model):
    noise, times = model.draw_flow(2000, torch.Generator().manual_seed(0))
    assert noise.shape == (2000, 3, 50, 6) and times.shape == (2000, 3)
    beta = TrainConfig.time_beta  # Beta(beta, 1) has mean beta / (beta + 1), kept off t = 0
    assert float(times.min()) >= 0.001 and float(times.mean()) == pytest.approx(beta / (beta + 1), abs=0.01)


def test_elements_are_minus_the_flow_matching_errors_of_the_executed_chunk(model):
    batch = batch_of(2)
    draws = model.draw_flow(2, torch.Generator().manual_seed(1))
    sample = model.sample(batch, torch.randn(2, 50, 6), torch.randn(2, SMALL.steps, 50, 6), flow=draws)
    with torch.no_grad():
        prefix = model.policy.encode(batch)
        assert torch.equal(sample.chain[:, -1], sample_chunk(model.policy, prefix, sample.chain[:, 0]))  # noise-free
        noise, times = draws
        for i in range(2):
            for m in range(3):
                t, eps, action = times[i, m], noise[i, m], sample.chain[i, -1]
                x_t = t * eps + (1 - t) * action
                velocity = model.policy.velocity({k: v[i:i + 1] for k, v in prefix.items()}, x_t[None], t[None])[0]
                expected = -((velocity - (eps - action)) ** 2)
                assert torch.allclose(sample.log_probs[i, m], expected, atol=1e-5)
    assert sample.log_probs.shape == (2, 3, 50, 6)


def _storage(model, rewards):
    storage = Storage()
    generator = torch.Generator().manual_seed(2)
    for episode, reward in enumerate(rewards):
        batch = batch_of(2, seed=episode)
        draws = model.draw_flow(2, generator)
        sample = model.sample(batch, torch.randn(2, 50, 6, generator=generator), None, flow=draws)
        prefixes = split_prefix(sample.prefix, 2)
        decisions = [Decision(sample.chain[i], sample.log_probs[i], float(sample.value[i]),
                              batch["observation.state"][i], prefixes[i], reward=reward,
                              flow=(draws[0][i], draws[1][i])) for i in range(2)]
        storage.add_episode(decisions, bootstrap=0.0)
    storage.finish(0.99, 0.95)
    return storage


def test_reevaluation_from_storage_equals_the_rollout_and_the_self_check_passes(model):
    storage = _storage(model, [1.0, 0.0])
    index = torch.arange(len(storage))
    chain, prefix, state, old = storage.minibatch(index)
    with torch.no_grad():
        new, _ = model.evaluate(chain, prefix, state, flow=storage.flow_draws(index))
    assert float((new - old).abs().max()) < 1e-5
    result = self_check(model, storage, {"chain": 1e-3}, clip=0.2)
    largest = float(-old[:8].min())  # the check reads the first 8 decisions
    # 1e-4 on the velocity, whatever the chain's grid and steps
    assert result["passed"] and result["log_prob_tolerance"] == pytest.approx(1e-4 * 2 * max(largest, 1) ** 0.5)


def test_an_update_makes_the_rewarded_chunks_likelier_and_the_others_less_likely(model):
    with torch.no_grad():  # a critic of 0: advantages are the GAE returns, (1.94, 1) and (0, 0) before normalising
        model.critic[-1].weight.zero_()
        model.critic[-1].bias.zero_()
    storage = _storage(model, [1.0, 0.0])
    index = torch.arange(len(storage))
    chain, prefix, state, old = storage.minibatch(index)
    optimizer = torch.optim.Adam(model.policy.parameters(), lr=1e-3)
    ppo_update(model, storage, optimizer, PPOConfig(epochs=3, minibatch=4, target_kl=0.0, likelihood="flow"),
               torch.Generator().manual_seed(0))
    with torch.no_grad():
        new, _ = model.evaluate(chain, prefix, state, flow=storage.flow_draws(index))
    gain = (new - old).mean(dim=(1, 2, 3))  # minus the change of each decision's flow-matching error
    assert storage.returns.tolist() == pytest.approx([1 + 0.99 * 0.95, 1.0, 0.0, 0.0])
    assert bool((gain[:2] > 0).all()) and bool((gain[2:] < 0).all())


def test_a_learned_start_under_the_flow_surrogate_needs_spread_exploration():
    flow = replace_fields(RLConfig(), likelihood="flow")
    with pytest.raises(ValueError, match="spread exploration"):
        replace_fields(flow, steer=True)
    assert replace_fields(flow, steer=True, spread_noise=0.3).start.steer
    assert replace_fields(flow, steer=True, spread_lr=0.0, spread_head_lr=0.0).start.steer  # a fixed spread
    with pytest.raises(ValueError, match="likelihood must be one of"):
        PPOConfig(likelihood="exact")


@pytest.mark.slow
def test_a_run_under_the_flow_surrogate_checks_itself_and_moves_the_velocity(tiny_policy_dir, tmp_path):
    from test_train import CFG, ENV

    from chess_sim.rl.train import run

    out = tmp_path / "run"
    run(tiny_policy_dir, out, replace_fields(CFG, iterations=2, likelihood="flow", flow_draws=2), ENV)
    check = json.loads((out / "check.json").read_text())
    assert check["passed"] and check["log_prob_max_abs_diff"] <= 1e-5
    log = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    assert log[-1]["iteration"] == 2 and log[-1]["approx_kl"] > 0
    start, end = CompactPolicy.load(tiny_policy_dir).state_dict(), CompactPolicy.load(out / "last").state_dict()
    assert any(not torch.equal(start[k], end[k]) for k in start)


def test_a_new_start_begins_at_the_initial_spread_and_a_brought_one_is_kept():
    from chess_sim.config import StartConfig
    from chess_sim.policy.start import with_spread

    policy = CompactPolicy(SMALL, Normalizer.identity())
    model = FlowRL(policy, start=StartConfig(steer=True, initial_spread=0.5))
    assert float(model.start.log_std.detach().exp()) == pytest.approx(0.5)
    brought = with_spread(policy, 0.7)
    model = FlowRL(brought, start=StartConfig(steer=True, initial_spread=0.5))
    assert model.policy is brought and float(model.start.std().detach()) == pytest.approx(0.7)


def test_without_push_away_only_the_positive_advantages_act(model):
    from chess_sim.rl.ppo import normalized_advantages

    storage = _storage(model, [1.0, 0.0])
    optimizer = torch.optim.Adam(model.policy.parameters(), lr=1e-3)
    cfg = PPOConfig(epochs=1, minibatch=len(storage), likelihood="flow", push_away=False)
    stats = ppo_update(model, storage, optimizer, cfg, torch.Generator().manual_seed(0))
    advantages = normalized_advantages(storage)
    assert bool((advantages < 0).any())
    assert stats["pg_loss"] == pytest.approx(-float(advantages.clamp_min(0).mean()), abs=1e-5)  # at ratio 1


@pytest.mark.slow
def test_a_run_from_a_hand_set_spread_resumes_with_its_own_start(tiny_policy_dir, tmp_path):
    from test_train import CFG, ENV

    from chess_sim.policy.loading import load_policy
    from chess_sim.rl.train import run

    out = tmp_path / "run"
    cfg = replace_fields(CFG, iterations=1, steer=True, initial_spread=0.5, spread_lr=0.0, spread_head_lr=0.0)
    run(tiny_policy_dir, out, cfg, ENV)
    run(tiny_policy_dir, out, replace_fields(cfg, iterations=2), ENV, resume=True)
    log = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    assert [line["iteration"] for line in log] == [0, 1, 2]
    assert float(load_policy(out / "last").start.log_std.detach().exp()) == pytest.approx(0.5)
