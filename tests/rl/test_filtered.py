"""Success-filtered flow matching (`rl/filtered.py`): the schedule by hand, which decisions are fitted, what an update
moves, the rollouts' start, and the config's rules."""

import pytest
import torch

from chess_sim.config import RL_PROFILES, FilteredConfig, PPOConfig, RLConfig, StartConfig, replace_fields
from chess_sim.policy.base import Normalizer, cast_prefix
from chess_sim.policy.compact import CompactPolicy
from chess_sim.policy.start import SteeredPolicy
from chess_sim.rl.filtered import filtered_update, fit_steps, successful_decisions, warmup_cosine
from chess_sim.rl.flow_rl import FlowRL
from chess_sim.rl.rollout import RolloutDriver
from chess_sim.rl.storage import Decision, Storage, split_prefix

from test_flow_rl import SMALL, batch_of


def test_warmup_then_cosine_down_to_zero_by_hand():
    factors = [warmup_cosine(step, 10, 2) for step in range(10)]
    assert factors[:2] == [0.5, 1.0]
    assert factors[2] == pytest.approx(1.0)  # the cosine starts at its top
    assert factors[9] == pytest.approx(0.0)  # and ends at 0 on the last step
    assert factors[2 + 7 // 2] == pytest.approx(0.5 * (1 + torch.cos(torch.tensor(torch.pi * 3 / 7)).item()))
    assert all(a >= b for a, b in zip(factors[1:], factors[2:]))
    assert warmup_cosine(0, 1, 0) == 1.0  # a single step is taken at the full rate


def test_fit_steps_count_every_epoch_and_the_last_short_minibatch():
    assert fit_steps(65, FilteredConfig(fit_epochs=3, fit_minibatch=32)) == 9
    assert fit_steps(0, FilteredConfig()) == 0


def _decision(value: float = 0.0) -> Decision:
    return Decision(torch.zeros(2, 1, 1), torch.zeros(1, 1, 1), value, torch.zeros(1), torch.zeros(1, 1))


def test_only_the_decisions_of_successful_episodes_are_chosen():
    storage = Storage()
    for length in (2, 3, 1):
        storage.add_episode([_decision() for _ in range(length)], 0.0)
    rows = [{"end": "success"}, {"end": "toppled"}, {"end": "success"}]
    assert successful_decisions(storage, rows) == [0, 1, 5]
    with pytest.raises(AssertionError, match="rows"):
        successful_decisions(storage, rows[:2])


@pytest.fixture()
def model():
    torch.manual_seed(0)
    return FlowRL(CompactPolicy(SMALL, Normalizer.identity()), likelihood="flow", flow_draws=2).eval()


def _storage(model, episodes: int = 3) -> Storage:
    storage = Storage()
    generator = torch.Generator().manual_seed(3)
    for episode in range(episodes):
        batch = batch_of(2, seed=episode)
        sample = model.sample(batch, torch.randn(2, 50, 6, generator=generator), None,
                              flow=model.draw_flow(2, generator))
        prefixes = split_prefix(sample.prefix, 2)
        storage.add_episode([Decision(sample.chain[i], sample.log_probs[i], float(sample.value[i]),
                                      batch["observation.state"][i], prefixes[i], flow=None) for i in range(2)], 0.0)
    storage.finish(0.99, 0.95)
    return storage


def _fm_loss(model, storage, index: list[int]) -> float:
    chain, prefix, _, _ = storage.minibatch(torch.tensor(index))
    noise, times = model.draw_flow(len(index), torch.Generator().manual_seed(99))
    with torch.no_grad():
        return float(-model.flow_log_probs(chain, cast_prefix(prefix, torch.float32), noise, times).mean())


def _optimizer(model):
    return torch.optim.AdamW([{"params": list(model.policy.parameters()), "lr": 0.0, "name": "chain"},
                              {"params": list(model.critic.parameters()), "lr": 1e-3, "name": "critic"}],
                             weight_decay=0.0)


def test_an_update_fits_the_chosen_chunks_and_moves_only_the_velocity(model):
    storage = _storage(model)
    chosen = [0, 1, 4]
    before = _fm_loss(model, storage, chosen)
    critic = [p.detach().clone() for p in model.critic.parameters()]
    optimizer = _optimizer(model)
    cfg = FilteredConfig(fit_lr=3e-3, fit_epochs=20, fit_minibatch=2, fit_warmup=2)
    stats = filtered_update(model, storage, chosen, optimizer, cfg, 1.0, torch.Generator().manual_seed(0))
    assert stats["fitted"] == 3 and stats["fit_steps"] == fit_steps(3, cfg) == 40
    assert stats["fit_loss_last_epoch"] < stats["fit_loss_first_epoch"]
    assert _fm_loss(model, storage, chosen) < 0.97 * before  # under draws it never saw
    assert all(torch.equal(a, b) for a, b in zip(critic, model.critic.parameters()))
    assert optimizer.param_groups[0]["lr"] == 0.0  # annealed to nothing by the last step
    assert not model.training


def test_an_anchored_fit_stays_nearer_the_reference_and_needs_it(model):
    import copy

    storage = _storage(model)
    reference = copy.deepcopy(model.policy).requires_grad_(False)
    chain, prefix, _, _ = storage.minibatch(torch.arange(len(storage)))
    prefix = cast_prefix(prefix, torch.float32)
    x_t = torch.randn(len(storage), 50, 6, generator=torch.Generator().manual_seed(5))
    t = torch.full((len(storage),), 0.5)

    def distance(anchor: float) -> float:
        fitted = copy.deepcopy(model)
        cfg = FilteredConfig(fit_lr=3e-3, fit_epochs=10, fit_minibatch=2, fit_warmup=2, anchor=anchor)
        filtered_update(fitted, storage, [0, 1, 4], _optimizer(fitted), cfg, 1.0, torch.Generator().manual_seed(0),
                        reference=reference)
        with torch.no_grad():
            return float((fitted.policy.velocity(prefix, x_t, t) - reference.velocity(prefix, x_t, t)).abs().mean())

    assert distance(10.0) < 0.6 * distance(0.0)  # 0.45 when written
    with pytest.raises(AssertionError, match="reference"):
        filtered_update(model, storage, [0], _optimizer(model), FilteredConfig(anchor=1.0), 1.0, torch.Generator())


def test_the_fit_runs_on_its_own_threads_and_gives_the_callers_back(model, monkeypatch):
    import chess_sim.rl.filtered as filtered

    seen = []
    monkeypatch.setattr(filtered, "_fit", lambda *args: seen.append(torch.get_num_threads()) or {})
    before = torch.get_num_threads()
    filtered_update(model, Storage(), [], None, FilteredConfig(fit_threads=3), 1.0, torch.Generator())
    assert seen == [3] and torch.get_num_threads() == before


def test_an_update_without_a_success_changes_nothing(model):
    storage = _storage(model)
    weights = {name: p.detach().clone() for name, p in model.policy.state_dict().items()}
    stats = filtered_update(model, storage, [], _optimizer(model), FilteredConfig(), 1.0, torch.Generator())
    assert stats == {"fitted": 0, "fit_steps": 0}
    assert all(torch.equal(weights[name], p) for name, p in model.policy.state_dict().items())


def test_rollouts_start_from_the_rollout_spread_whatever_the_policys_start(model):
    steered = FlowRL(model.policy, start=StartConfig(steer=True, initial_spread=0.5), likelihood="flow",
                     flow_draws=2).eval()
    assert isinstance(steered.policy, SteeredPolicy)
    batch, x0 = batch_of(2), torch.randn(2, 50, 6)
    draws = steered.draw_flow(2, torch.Generator().manual_seed(0))
    own = steered.sample(batch, x0, None, flow=draws)
    wide = steered.sample(batch, x0, None, flow=draws, start_spread=1.0)
    assert torch.allclose(own.chain[:, 0], 0.5 * x0) and torch.equal(wide.chain[:, 0], x0)
    filtered = RolloutDriver.for_run(steered, torch.Generator(), Storage(), RL_PROFILES["compact"])
    assert filtered.policy.start_spread == RL_PROFILES["compact"].filtered.rollout_spread
    assert not filtered.policy.scored and filtered.actor() is filtered.policy  # decided in the simulators
    assert filtered.policy.lowered.dtype == torch.bfloat16  # the profile's rollouts sample a bfloat16 chain
    ppo = RolloutDriver.for_run(steered, torch.Generator(), Storage(), RL_PROFILES["smolvla"])
    assert ppo.policy.start_spread is None and ppo.policy.scored and ppo.actor() is None and ppo.policy.lowered is None
    chain_model = FlowRL(model.policy, likelihood="chain")
    with pytest.raises(AssertionError, match="flow surrogate"):
        chain_model.sample(batch, x0, torch.randn(2, SMALL.steps, 50, 6), start_spread=1.0)


def test_an_unscored_sample_is_the_same_chain_without_log_probs_and_the_self_check_checks_the_sampler(model):
    from chess_sim.rl.check import self_check

    batch, x0 = batch_of(2), torch.randn(2, 50, 6)
    draws = model.draw_flow(2, torch.Generator().manual_seed(0))
    scored = model.sample(batch, x0, None, flow=draws, start_spread=1.0)
    unscored = model.sample(batch, x0, None, flow=draws, start_spread=1.0, scored=False)
    assert torch.equal(scored.chain, unscored.chain) and torch.equal(scored.value, unscored.value)
    assert unscored.log_probs is None and unscored.flow is None and scored.log_probs is not None
    storage = Storage()
    prefixes = split_prefix(unscored.prefix, 2)
    storage.add_episode([Decision(unscored.chain[i], None, 0.0, batch["observation.state"][i], prefixes[i])
                         for i in range(2)], 0.0)
    storage.finish(0.99, 0.95)
    assert storage.minibatch(torch.arange(2))[3] is None
    result = self_check(model, storage, {"chain": 1e-4}, clip=0.2)
    assert result["passed"] and not result["scored"] and "log_prob_max_abs_diff" not in result


def test_the_filtered_algorithm_needs_the_noise_free_chain_and_a_fixed_start():
    with pytest.raises(ValueError, match="likelihood flow"):
        RLConfig(algorithm="filtered")
    with pytest.raises(ValueError, match="spread_lr 0"):
        RLConfig(algorithm="filtered", ppo=PPOConfig(likelihood="flow"), start=StartConfig(steer=True))
    with pytest.raises(ValueError, match="algorithm must be"):
        RLConfig(algorithm="grpo")
    with pytest.raises(ValueError, match="rollout_spread"):
        FilteredConfig(rollout_spread=0.0)
    compact = RL_PROFILES["compact"]
    assert compact.algorithm == "filtered" and compact.start.initial_spread == 0.5
    assert compact.policy_lrs()["chain"] == compact.filtered.fit_lr
    ppo = replace_fields(compact, algorithm="ppo", spread_lr=0.0, chain_dtype="float32")
    assert ppo.policy_lrs()["chain"] == compact.ppo.lr
