"""The storage's episode index and its advantages."""

import pytest
import torch

from chess_sim.rl.storage import Decision, Storage


def _decision(value: float = 0.0, reward: float = 0.0) -> Decision:
    return Decision(torch.zeros(2, 1, 1), None, value, torch.zeros(1), torch.zeros(1, 1), reward=reward)


def test_storage_lists_each_episode_decisions():
    storage = Storage()
    for length in (3, 1, 2):
        storage.add_episode([_decision() for _ in range(length)], bootstrap=0.0)
    assert storage.episodes() == [[0, 1, 2], [3], [4, 5]]
    assert storage.minibatch(torch.arange(2))[3] is None  # a rollout that kept no log-probs


def test_finish_bootstraps_a_time_limit_end_from_its_value():
    storage = Storage()
    storage.add_episode([_decision(0.5, 1.0)], bootstrap=0.25)
    storage.finish(gamma=0.5, lam=1.0)
    assert storage.advantages.tolist() == [pytest.approx(1.0 + 0.5 * 0.25 - 0.5)]
