"""A policy driving the env: deterministic per scene, x_0 paired across policies through torch_seed."""

from dataclasses import replace

import numpy as np
import torch

from chess_sim.config import CameraConfig, CompactConfig, profile
from chess_sim.policy import rollout
from chess_sim.policy.compact import CompactPolicy
from chess_sim.sim.env import ChessEnv

SMALL = CompactConfig(image_size=32, width=32, layers=1, heads=2)


def short_env():
    return ChessEnv(replace(profile("baseline"), camera=CameraConfig(64, 64), episode_seconds=3.4))


def test_same_scene_same_episode_and_paired_noise(monkeypatch):
    torch.manual_seed(0)
    policy_a = CompactPolicy(SMALL).eval()
    torch.manual_seed(1)
    policy_b = CompactPolicy(SMALL).eval()
    draws = []
    real_randn = torch.randn

    def recording_randn(*args, **kwargs):
        value = real_randn(*args, **kwargs)
        draws.append(value.clone())
        return value

    monkeypatch.setattr(rollout.torch, "randn", recording_randn)
    env = short_env()
    first = rollout.run_policy_episode(env, policy_a, 9_300_003, 0)
    second = rollout.run_policy_episode(env, policy_a, 9_300_003, 0)
    assert first == second and first["decisions"] == 3  # 102 steps: two full chunks and a partial one
    a_draws = draws[:3]
    draws.clear()
    rollout.run_policy_episode(env, policy_b, 9_300_003, 0)
    assert all(torch.equal(x, y) for x, y in zip(a_draws, draws[:3]))
    assert not torch.equal(a_draws[0], a_draws[1])
    assert np.isfinite(first["return"])
