"""Success-filtered flow matching (`rl/algorithms/filtered.py`): the schedule by hand, which decisions are fitted,
what an update moves, its anchor and threads, the rollouts it asks for, and its resumable state."""

import copy

import pytest
import torch

from chess_sim.config import RL_PROFILES, FilteredConfig, RLConfig, StartConfig, TrainConfig
from chess_sim.policy.base import cast_prefix, flow_times
from chess_sim.policy.start import SteeredPolicy
from chess_sim.rl.algorithms.filtered import (SuccessFiltered, chunk_errors, fit_draws, fit_steps, warmup_cosine,
                                              weighted_decisions)
from chess_sim.rl.storage import Decision, Storage

from rl_helpers import SMALL, small_policy, stored_rollout


def filtered(policy=None, start=StartConfig(), reference=None, **fields) -> SuccessFiltered:
    algorithm = SuccessFiltered(policy or small_policy(), RLConfig(start=start, algorithm=FilteredConfig(**fields)),
                                lambda: reference)
    algorithm.generator = torch.Generator().manual_seed(0)
    return algorithm


def rollout(algorithm, episodes=3):
    return stored_rollout(algorithm.model, algorithm.rollout_spec(), episodes)


def rows(storage, successes):
    return [{"index": i, "end": "success" if i in successes else "toppled"} for i in range(len(storage.episodes()))]


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


def _episodes(lengths) -> Storage:
    storage = Storage()
    for length in lengths:
        storage.add_episode([Decision(torch.zeros(2, 1, 1), None, 0.0, torch.zeros(1), torch.zeros(1, 1))
                             for _ in range(length)], 0.0)
    return storage


def test_only_the_decisions_of_successful_episodes_are_chosen():
    storage = _episodes((2, 3, 1))
    episodes = [{"index": 0, "end": "success"}, {"index": 1, "end": "toppled"}, {"index": 2, "end": "success"}]
    assert weighted_decisions(storage, episodes) == ([0, 1, 5], {0: 1.0, 1: 1.0, 5: 1.0})
    with pytest.raises(AssertionError, match="rows"):
        weighted_decisions(storage, episodes[:2])


def test_groups_weigh_each_success_by_its_scenes_leave_one_out_advantage():
    # scene 0: 1 of 3 solved (weight (3 - 1) / 2 = 1); scene 1: 2 of 3 (weight 1 / 2); scene 2: 3 of 3 (weight 0)
    ends = {0: ["success", "toppled", "timeout"], 1: ["success", "success", "dropped"], 2: ["success"] * 3}
    rows = [{"index": scene, "end": end} for scene, outcomes in ends.items() for end in outcomes]
    storage = _episodes([1] * len(rows))
    chosen, weights = weighted_decisions(storage, rows)
    assert chosen == [0, 3, 4] and weights == {0: 1.0, 3: 0.5, 4: 0.5}
    assert SuccessFiltered.log_keys[-2:] == ("mixed_scenes", "solved_scenes")


def test_a_fit_weighs_each_decisions_errors_by_its_weight_over_the_mean_weight(monkeypatch):
    import chess_sim.rl.algorithms.filtered as filtered_module

    algorithm = filtered(fit_epochs=1, fit_minibatch=2, fit_warmup=1)
    storage = rollout(algorithm, episodes=1)  # two decisions
    errors = torch.tensor([1.0, 3.0])[:, None, None, None].requires_grad_()  # each decision's, in storage order
    monkeypatch.setattr(filtered_module, "chunk_errors", lambda policy, chain, *args: errors)
    monkeypatch.setattr(torch, "randperm", lambda n, generator=None: torch.arange(n))
    stats = algorithm._fit(storage, [0, 1], {0: 1.0, 1: 0.5})
    assert stats["fit_loss_first_epoch"] == pytest.approx((1.0 * 1.0 + 3.0 * 0.5) / 2 / 0.75)


def test_the_fits_draws_have_the_training_time_distribution():
    noise, times = fit_draws(small_policy(), 3, 2, torch.Generator().manual_seed(4))
    again = torch.Generator().manual_seed(4)
    assert torch.equal(noise, torch.randn(3, 2, 50, 6, generator=again))
    assert torch.equal(times, flow_times(6, TrainConfig.time_beta, again).view(3, 2))


def _fm_loss(algorithm, storage, index: list[int]) -> float:
    chain, prefix, _, _ = storage.minibatch(torch.tensor(index))
    noise, times = fit_draws(algorithm.model.policy, len(index), 2, torch.Generator().manual_seed(99))
    with torch.no_grad():
        return float(chunk_errors(algorithm.model.policy, chain, cast_prefix(prefix, torch.float32), noise,
                                  times).mean())


def test_an_update_fits_the_successful_chunks():
    algorithm = filtered(fit_lr=3e-3, fit_epochs=20, fit_minibatch=2, fit_warmup=2, fit_draws=2)
    storage = rollout(algorithm)
    chosen = [0, 1, 4, 5]  # episodes 0 and 2 succeeded
    before = _fm_loss(algorithm, storage, chosen)
    stats = algorithm.update(storage, rows(storage, {0, 2}), iteration=1)
    assert set(stats) <= set(SuccessFiltered.log_keys)
    assert stats["fitted"] == 4 and stats["fit_steps"] == fit_steps(4, algorithm.cfg) == 40
    assert stats["fit_loss_last_epoch"] < stats["fit_loss_first_epoch"]
    assert _fm_loss(algorithm, storage, chosen) < 0.97 * before  # under draws it never saw
    assert algorithm.optimizer.param_groups[0]["lr"] == 0.0  # annealed to nothing by the last step
    assert not algorithm.model.training and algorithm.model.critic is None


def test_an_anchored_fit_stays_nearer_the_reference():
    policy = small_policy()
    reference = copy.deepcopy(policy).requires_grad_(False)
    storage = rollout(filtered(policy))
    chain, prefix, _, _ = storage.minibatch(torch.arange(len(storage)))
    prefix = cast_prefix(prefix, torch.float32)
    x_t = torch.randn(len(storage), 50, 6, generator=torch.Generator().manual_seed(5))
    t = torch.full((len(storage),), 0.5)

    def distance(anchor: float) -> float:
        algorithm = filtered(copy.deepcopy(policy), reference=reference, fit_lr=3e-3, fit_epochs=10,
                             fit_minibatch=2, fit_warmup=2, anchor=anchor)
        assert (algorithm.reference is reference) == (anchor > 0)
        algorithm.update(storage, rows(storage, {0, 2}), iteration=1)
        with torch.no_grad():
            fitted = algorithm.model.policy.velocity(prefix, x_t, t)
            return float((fitted - reference.velocity(prefix, x_t, t)).abs().mean())

    assert distance(10.0) < 0.6 * distance(0.0)


def test_the_fit_runs_on_its_own_threads_and_gives_the_callers_back(monkeypatch):
    algorithm = filtered(fit_threads=3)
    seen = []
    monkeypatch.setattr(algorithm, "_fit", lambda *args: seen.append(torch.get_num_threads()) or {})
    before = torch.get_num_threads()
    algorithm.update(Storage(), [], iteration=1)
    assert seen == [3] and torch.get_num_threads() == before


def test_an_update_without_a_success_changes_nothing():
    algorithm = filtered()
    storage = rollout(algorithm)
    weights = {name: p.detach().clone() for name, p in algorithm.model.policy.state_dict().items()}
    assert algorithm.update(storage, rows(storage, set()), iteration=1) == {"fitted": 0, "fit_steps": 0,
                                                                           "mixed_scenes": 0, "solved_scenes": 0}
    assert all(torch.equal(weights[name], p) for name, p in algorithm.model.policy.state_dict().items())


def test_rollouts_run_the_noise_free_chain_from_the_standard_normal_whatever_the_policys_start():
    algorithm = filtered(start=StartConfig(steer=True, initial_spread=0.5), chain_dtype="bfloat16")
    assert isinstance(algorithm.model.policy, SteeredPolicy)
    spec = algorithm.rollout_spec()
    assert spec.start_spread == 1.0 and spec.sigmas is None and not spec.scored
    assert spec.lowered.dtype == torch.bfloat16
    x0, noise, spread = algorithm.draws(2, torch.Generator().manual_seed(0))
    again = torch.Generator().manual_seed(0)
    assert torch.equal(x0, torch.randn(2, 50, 6, generator=again)) and noise is None and spread is None
    fit_draws(algorithm.model.policy, 2, 4, again)  # the draws of the runs before each algorithm had its module
    assert torch.equal(torch.randn(3, generator=again),
                       torch.randn(3, generator=_after_draws(algorithm, torch.Generator().manual_seed(0))))
    storage = rollout(algorithm)
    assert storage.decisions[0].log_probs is None
    result = algorithm.check(storage)
    assert result["passed"] and not result["scored"] and result["rollout_chain_dtype"] == "bfloat16"
    assert "log_prob_max_abs_diff" not in result and result["rollout_chain_deterministic"]
    assert RL_PROFILES["compact"].filtered.chain_dtype == "bfloat16"


def _after_draws(algorithm, generator):
    algorithm.draws(2, generator)
    return generator


def test_the_state_resumes_also_from_an_optimizer_with_the_groups_of_older_runs():
    algorithm = filtered(fit_lr=1e-3, fit_minibatch=2, fit_epochs=1)
    storage = rollout(algorithm)
    algorithm.update(storage, rows(storage, {0}), iteration=1)
    state = algorithm.state_dict()
    twin = filtered()
    twin.load_state_dict(state)
    assert twin.optimizer.state_dict()["state"].keys() == state["optimizer"]["state"].keys()
    older = copy.deepcopy(state["optimizer"])  # runs before the restructure kept start and critic groups too
    extra = len(older["param_groups"][0]["params"])
    older["param_groups"] += [{**older["param_groups"][0], "name": "critic", "params": [extra, extra + 1]}]
    older["state"][extra] = {"step": torch.tensor(1.0)}
    twin.load_state_dict({"optimizer": older})
    assert twin.optimizer.state_dict()["state"].keys() == state["optimizer"]["state"].keys()
