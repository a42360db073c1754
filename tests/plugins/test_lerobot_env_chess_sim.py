"""The LeRobot environment plugin: discovered as LeRobot discovers plugins, its config, and the env it makes."""

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from chess_sim.config import TEST_SEED, profile
from chess_sim.sim.tasks import sample_task


@pytest.fixture(scope="module")
def config_class():
    from lerobot.envs.configs import EnvConfig
    from lerobot.utils.import_utils import register_third_party_plugins

    register_third_party_plugins()  # what lerobot-eval and lerobot-train do at start-up
    return EnvConfig.get_choice_class("chess_sim")


def test_lerobot_discovers_the_plugin_and_its_features(config_class):
    config = config_class()
    assert config.type == "chess_sim" and config.gym_id == "lerobot_env_chess_sim/ChessSim-v0"
    assert {key: tuple(feature.shape) for key, feature in config.features.items()} == {
        "action": (6,), "agent_pos": (6,), "pixels/front": (256, 256, 3), "pixels/wrist": (256, 256, 3)}
    assert config.features_map == {"action": "action", "agent_pos": "observation.state",
                                   "pixels/front": "observation.images.front",
                                   "pixels/wrist": "observation.images.wrist"}
    assert config_class(observation_size=96).features["pixels/front"].shape == (96, 96, 3)
    assert config.gym_kwargs == {"scene_seed": TEST_SEED, "env_profile": "baseline", "tasks": "pawn-knight",
                                 "early_stop": True, "observation_size": None}


@pytest.mark.parametrize("fields, message", [({"env_profile": "fancy"}, "unknown env_profile 'fancy'"),
                                             ({"tasks": "castles"}, "unknown tasks 'castles'"),
                                             ({"observation_size": 0}, "observation_size")])
def test_bad_options_are_one_line_errors(config_class, fields, message):
    with pytest.raises(ValueError, match=message):
        config_class(**fields)


def test_the_reset_seed_picks_the_scene_index_and_autoreset_takes_the_next(config_class):
    config = config_class(scene_seed=123, observation_size=32)
    env = gymnasium.make(config.gym_id, disable_env_checker=True, **config.gym_kwargs)
    try:
        from lerobot.envs.utils import NEW_ROLLOUT_OPTION

        observation, info = env.reset(seed=7, options={NEW_ROLLOUT_OPTION: True})
        assert (info["seed"], info["index"], info["is_success"]) == (123, 7, False)
        assert env.unwrapped.task_description == sample_task(123, 7, profile("baseline").scene).instruction
        assert observation["pixels"]["front"].shape == (32, 32, 3) and observation["agent_pos"].shape == (6,)
        assert env.unwrapped._max_episode_steps == 600
        _, _, _, _, info = env.step(env.unwrapped.rest_action())
        assert info["is_success"] is False and info["end"] is None
        assert env.reset()[1]["index"] == 8
        assert env.unwrapped.render().shape == (256, 256, 3)
    finally:
        env.close()


def test_a_vector_env_as_lerobot_eval_makes_it(config_class):
    vec = config_class(observation_size=32).create_envs(n_envs=2, use_async_envs=False)["chess_sim"][0]
    try:
        observation, info = vec.reset(seed=[0, 1])
        assert list(info["index"]) == [0, 1] and not info["is_success"].any()
        assert vec.call("task_description") == tuple(sample_task(TEST_SEED, i, profile("baseline").scene).instruction
                                                     for i in (0, 1))
        rest = np.stack(vec.call("rest_action"))
        _, reward, terminated, truncated, info = vec.step(rest)
        assert reward.shape == (2,) and not terminated.any() and not info["is_success"].any()
    finally:
        vec.close()


def test_the_package_registers_chess_sim_v0_and_it_passes_gymnasiums_checker():
    import chess_sim  # noqa: F401

    env = gymnasium.make("ChessSim-v0")
    try:
        check_env(env.unwrapped)
    finally:
        env.close()
