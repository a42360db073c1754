"""ReinFlow PPO (`rl/algorithms/reinflow_ppo.py`): its noise sizes and draws, critic warm-up, what an update moves
(also for a shorter executed chunk and a learned start), the self-check, and spread exploration."""

import copy
import math

import pytest
import torch

from chess_sim.config import OptimConfig, PPOConfig, RLConfig, StartConfig
from chess_sim.rl.algorithms.reinflow_ppo import ReinFlowPPO
from chess_sim.rl.check import log_prob_tolerance

from rl_helpers import SMALL, small_policy, stored_rollout


def ppo(policy=None, start=StartConfig(), optim=OptimConfig(), **fields) -> ReinFlowPPO:
    algorithm = ReinFlowPPO(policy or small_policy(), RLConfig(start=start, optim=optim, algorithm=PPOConfig(**fields)))
    algorithm.generator = torch.Generator().manual_seed(0)
    return algorithm


def steered(std=0.5, **fields) -> ReinFlowPPO:
    algorithm = ppo(start=StartConfig(steer=True), sigma_end=0.02, **fields)
    with torch.no_grad():
        algorithm.model.start.log_std.fill_(math.log(std))
    return algorithm


def rollout(algorithm, episodes=2, **kwargs):
    return stored_rollout(algorithm.model, algorithm.rollout_spec(), episodes, **kwargs)


def test_the_noise_sizes_run_from_start_to_end_and_the_draws_come_in_order():
    algorithm = ppo()
    assert algorithm.sigmas.shape == (SMALL.steps, 6)
    assert float(algorithm.sigmas[0, 0]) == pytest.approx(0.2) and float(algorithm.sigmas[-1, 0]) == pytest.approx(0.002)
    x0, noise, spread = algorithm.draws(3, torch.Generator().manual_seed(1))
    again = torch.Generator().manual_seed(1)
    assert torch.equal(x0, torch.randn(3, 50, 6, generator=again))
    assert torch.equal(noise, torch.randn(3, SMALL.steps, 50, 6, generator=again)) and spread is None
    assert steered(spread_noise=0.3).draws(3, torch.Generator())[2].shape == (3, 1)
    spec = algorithm.rollout_spec()
    assert spec.scored and spec.sigmas is algorithm.sigmas and spec.start_spread is None and spec.lowered is None


def test_critic_warmup_leaves_the_policy_untouched():
    algorithm = ppo(epochs=1, minibatch=2, critic_warmup=1, lr=1e-2)
    storage = rollout(algorithm)
    policy_before = {k: v.clone() for k, v in algorithm.model.policy.state_dict().items()}
    critic_before = [p.detach().clone() for p in algorithm.model.critic.parameters()]
    stats = algorithm.update(storage, [], iteration=1)
    assert all(torch.equal(policy_before[k], v) for k, v in algorithm.model.policy.state_dict().items())
    assert any(not torch.equal(a, b) for a, b in zip(critic_before, algorithm.model.critic.parameters()))
    assert stats["epochs_done"] == 1


def test_an_update_moves_the_policy_and_reports_the_seeds_statistics():
    algorithm = ppo(epochs=2, minibatch=2, target_kl=0.0, lr=1e-3, critic_warmup=0)
    storage = rollout(algorithm)
    stats = algorithm.update(storage, [], iteration=1)
    for key in ("pg_loss", "v_loss", "kl", "clipfrac", "clip_active", "grad_norm", "explained_variance", "sigma_mean"):
        assert key in stats
    assert set(stats) <= set(ReinFlowPPO.log_keys)
    assert stats["epochs_done"] == 2 and not stats["kl_stop"]
    chain, prefix, _, old = storage.minibatch(torch.arange(len(storage)))
    with torch.no_grad():
        new = algorithm.model.evaluate(chain, prefix, algorithm.sigmas)
    assert float((new - old).abs().max()) > 1e-4


def test_the_epochs_stop_once_the_kl_passes_its_target():
    algorithm = ppo(epochs=5, minibatch=2, target_kl=1e-12, lr=1e-3, critic_warmup=0)
    stats = algorithm.update(rollout(algorithm), [], iteration=1)
    assert stats["kl_stop"] and stats["epochs_done"] == 1


def test_a_policy_executing_part_of_its_chunk_learns_from_that_part_alone():
    algorithm = ppo(epochs=1, minibatch=2, lr=1e-3, critic_warmup=0)
    algorithm.model.policy.set_action_steps(10)
    storage = rollout(algorithm)
    ignored = copy.deepcopy(storage)  # the same decisions, the last transition's unexecuted log-probs scrambled
    for decision in ignored.decisions:
        decision.log_probs[-1, 10:] = torch.randn_like(decision.log_probs[-1, 10:]) * 100
    earlier = copy.deepcopy(storage)  # an earlier transition's unexecuted elements shape the executed actions
    for decision in earlier.decisions:
        decision.log_probs[0, 10:] += 1.0
    weights = []
    for stored in (storage, ignored, earlier):
        trained = copy.deepcopy(algorithm)
        trained.generator = torch.Generator().manual_seed(0)
        trained.update(stored, [], iteration=1)
        weights.append(trained.model.policy.state_dict())
    assert all(torch.equal(weights[0][key], weights[1][key]) for key in weights[0])
    assert any(not torch.equal(weights[0][key], weights[2][key]) for key in weights[0])
    checks = [algorithm.check(stored) for stored in (storage, ignored)]
    assert all(checks[0][key] == checks[1][key] for key in checks[0] if key.startswith(("shift_", "outside_clip_")))


def test_check_tolerance_is_the_rounding_allowance_over_the_smallest_sigma():
    assert log_prob_tolerance(ppo().sigmas) == pytest.approx(1e-5 / 0.002)
    assert log_prob_tolerance(ppo(sigma_end=0.02).sigmas) == pytest.approx(1e-5 / 0.02)


def test_check_passes_a_fresh_rollout_and_fails_a_likelihood_mismatch():
    algorithm = ppo(lr=1e-5)
    storage = rollout(algorithm)
    assert algorithm.check(storage)["passed"]
    for decision in storage.decisions:
        decision.log_probs = decision.log_probs + 0.01  # twice the 5e-3 nats tolerance
    result = algorithm.check(storage)
    assert not result["passed"] and result["log_prob_max_abs_diff"] == pytest.approx(0.01, abs=1e-3)


def test_a_start_only_update_equals_the_full_one_and_leaves_the_chain():
    results = []
    # chain_trains False re-evaluates the start alone, True the whole chain; with the chain's lr 0 (and no gradient
    # clip: the full path's chain gradients would enter the clipped norm) both must give the same update
    for chain_trains in (False, True):
        algorithm = steered(epochs=2, minibatch=2, target_kl=0.0, lr=0.0, spread_lr=1e-2, spread_head_lr=1e-2,
                            critic_warmup=0)
        algorithm.max_grad_norm = 1e9
        assert not algorithm.chain_trains
        algorithm.chain_trains = chain_trains
        storage = rollout(algorithm)
        before = {k: v.clone() for k, v in algorithm.model.policy.state_dict().items()}
        stats = algorithm.update(storage, [], iteration=1)
        after = algorithm.model.policy.state_dict()
        assert all(torch.equal(before[k], after[k]) for k in before if not k.startswith("start."))
        assert not torch.equal(before["start.log_std"], after["start.log_std"])
        results.append((stats, after))
    (fast, fast_state), (full, full_state) = results
    assert fast["pg_loss"] == pytest.approx(full["pg_loss"], abs=1e-4)
    assert all(torch.allclose(fast_state[k], full_state[k], atol=1e-5) for k in fast_state)


def test_the_self_check_update_moves_a_steered_start_at_its_own_lrs():
    still, moved = (steered(lr=0.0, spread_lr=lr, spread_head_lr=0.0) for lr in (0.0, 1e-2))
    still_check, moved_check = (algorithm.check(rollout(algorithm)) for algorithm in (still, moved))
    assert still_check["passed"] and moved_check["passed"] and moved_check["update_lrs"]["start_spread"] == 1e-2
    assert still_check["shift_element_max_nats"] <= still_check["log_prob_tolerance"] \
        < moved_check["shift_element_max_nats"]


def test_drawn_spreads_reevaluate_and_pass_the_self_check():
    algorithm = steered(spread_noise=0.3, lr=0.0, spread_lr=1e-2, spread_head_lr=0.0)
    storage = rollout(algorithm)
    index = torch.arange(len(storage))
    chain, prefix, _, old = storage.minibatch(index)
    drawn, old_spread = storage.spreads(index)
    with torch.no_grad():
        new = algorithm.model.evaluate(chain, prefix, algorithm.sigmas, drawn)
        assert torch.allclose(algorithm.model.spread_log_probs(drawn, prefix), old_spread)
    assert float((new - old).abs().max()) < 1e-3
    assert algorithm.check(storage)["passed"]


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_ppo_moves_the_spread_towards_the_draws_that_paid(sign):
    """Rewards that grow (sign 1) or shrink (-1) with each decision's drawn log-spread: one update moves the
    learned spread the same way."""
    algorithm = steered(std=0.5, spread_noise=0.3, epochs=2, minibatch=4, target_kl=0.0, lr=0.0, spread_lr=1e-2,
                        spread_head_lr=0.0, critic_lr=0.0, critic_warmup=0)
    storage = rollout(algorithm, episodes=8, reward=lambda i, episode, sample: sign * float(sample.spread[i, 0]))
    stats = algorithm.update(storage, [], iteration=1)
    assert sign * (float(algorithm.model.start.log_std.detach()) - math.log(0.5)) > 0.005
    assert stats["spread_kl"] > 0.0  # the second epoch sees the first epoch's move


def test_spread_exploration_needs_a_learned_start():
    with pytest.raises(ValueError, match="learned start"):
        ppo(spread_noise=0.3)


def test_the_state_round_trips_the_critic_and_the_optimizer():
    algorithm = ppo(lr=1e-3, critic_warmup=0, minibatch=2, epochs=1)
    algorithm.update(rollout(algorithm), [], iteration=1)
    twin = ppo(lr=1e-3)
    twin.load_state_dict(algorithm.state_dict())
    assert all(torch.equal(a, b) for a, b in zip(algorithm.model.critic.parameters(), twin.model.critic.parameters()))
    assert twin.optimizer.state_dict()["state"].keys() == algorithm.optimizer.state_dict()["state"].keys()
