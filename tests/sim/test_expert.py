"""The scripted expert on a small fixed sample, and taking over mid-episode."""

from dataclasses import replace

import numpy as np
import pytest

from chess_sim.config import profile
from chess_sim.sim.env import ChessEnv
from chess_sim.sim.episodes import expert_episode
from chess_sim.sim.expert import ExpertDriver

SEED = 5_500_001


@pytest.fixture(scope="module")
def env():
    environment = ChessEnv(replace(profile("baseline"), render=False, early_stop=True))
    yield environment
    environment.close()


@pytest.fixture(scope="module")
def expert(env):
    return ExpertDriver(env)


@pytest.mark.slow
def test_expert_solves_a_fixed_sample_of_pawn_and_knight_moves(env, expert):
    rows = [expert_episode(env, expert, SEED, index)[0] for index in range(6)]
    assert {row["piece"] for row in rows} == {"pawn", "knight"}
    for row in rows:
        assert row["end"] == "success", row
        assert row["place_error_mm"] <= 3.0
        assert row["clean_lift"] is True


def test_expert_takes_over_after_a_random_start(env, expert):
    env.reset(seed=SEED, options={"index": 1})
    rng = np.random.default_rng(0)
    home = env.rest_action()
    for _ in range(20):  # wander near the rest pose first
        env.step(home + rng.normal(0.0, 4.0, size=6).astype(np.float32))
    for _ in range(env.cfg.max_steps):
        _, _, terminated, truncated, info = env.step(expert.action())
        if terminated or truncated:
            break
    assert info["end"] == "success"


def test_expert_actions_are_in_lerobot_units(env, expert):
    env.reset(seed=SEED, options={"index": 0})
    action = expert.action()
    assert action.shape == (6,) and action.dtype == np.float32
    assert np.all(action >= env.units.lower - 1e-3) and np.all(action <= env.units.upper + 1e-3)
    assert 0.0 <= action[5] <= 100.0


def test_expert_rollout_does_not_depend_on_earlier_scenes(env, expert):
    def rollout(environment, driver, steps=120):
        environment.reset(seed=SEED, options={"index": 7})
        for _ in range(steps):
            environment.step(driver.action())
        return environment.data.qpos.copy()

    for index in range(3):  # use the expert's IK (and any random restarts) on other scenes first
        env.reset(seed=SEED, options={"index": index})
        for _ in range(30):
            env.step(expert.action())
    fresh = ChessEnv(replace(profile("baseline"), render=False, early_stop=True))
    assert np.array_equal(rollout(env, expert), rollout(fresh, ExpertDriver(fresh)))


def test_expert_check_runs_on_a_copy(env, expert):
    env.reset(seed=SEED, options={"index": 0})
    assert expert.solves() is True
    assert env.steps == 0 and env.data.time == 0.0
    fresh = ChessEnv(replace(profile("baseline"), render=False, early_stop=True))
    fresh.reset(seed=SEED, options={"index": 0})
    assert np.array_equal(fresh.data.qpos, env.data.qpos)
