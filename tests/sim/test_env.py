"""ChessEnv contract: Gymnasium API, determinism, bad actions, chunks, expert check."""

from dataclasses import replace

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from chess_sim.config import CameraConfig, profile
from chess_sim.sim.env import ChessEnv
from chess_sim.sim.expert import ExpertDriver
from chess_sim.sim.images import resize_image

SEED = 5_500_001


@pytest.fixture(scope="module")
def env():
    environment = ChessEnv(replace(profile("baseline"), camera=CameraConfig(64, 64)))
    yield environment
    environment.close()


@pytest.fixture(scope="module")
def physics_env():
    environment = ChessEnv(replace(profile("baseline"), render=False))
    yield environment
    environment.close()


def test_check_env_passes(env):
    check_env(env, skip_render_check=True)


def test_registered_id_builds():
    environment = gymnasium.make("ChessSim-v0", cfg=replace(profile("baseline"), render=False))
    observation, info = environment.reset(seed=SEED)
    assert observation["agent_pos"].shape == (6,)
    assert info["instruction"].startswith("Move the ")
    environment.close()


def test_importing_the_package_registers_the_env():
    import subprocess
    import sys

    code = ("import gymnasium; env = gymnasium.make('chess_sim:ChessSim-v0'); "
            "observation, info = env.reset(seed=5500001); print(info['instruction']); env.close()")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-1000:]
    assert done.stdout.startswith("Move the ")


def test_observation_layout_and_fresh_copies(env):
    observation, info = env.reset(seed=SEED, options={"index": 1})
    assert set(observation["pixels"]) == {"front", "wrist"}
    assert observation["pixels"]["front"].shape == (64, 64, 3) and observation["pixels"]["front"].dtype == np.uint8
    assert observation["agent_pos"].dtype == np.float32
    before = observation["agent_pos"].copy()
    env.step(ExpertDriver(env).action())
    assert np.array_equal(observation["agent_pos"], before)  # the env never hands out views of its state
    assert {"piece", "from", "to", "instruction", "torch_seed", "seed", "index"} <= set(info)
    assert info["index"] == 1


def test_same_scene_same_initial_state_and_rollout(physics_env):
    def rollout():
        _, info = physics_env.reset(seed=SEED, options={"index": 2})
        start = physics_env.data.qpos.copy()
        expert = ExpertDriver(physics_env)
        for _ in range(60):
            physics_env.step(expert.action())
        return info, start, physics_env.data.qpos.copy()

    info_a, start_a, end_a = rollout()
    info_b, start_b, end_b = rollout()
    assert info_a == info_b
    assert np.array_equal(start_a, start_b)
    assert np.array_equal(end_a, end_b)


def test_seed_without_index_starts_at_zero_and_then_counts(physics_env):
    _, first = physics_env.reset(seed=SEED)
    _, second = physics_env.reset()
    assert (first["index"], second["index"]) == (0, 1)


@pytest.mark.parametrize("bad", [np.zeros(5), np.zeros((3, 6))])
def test_an_action_of_the_wrong_shape_raises_value_error(physics_env, bad):
    physics_env.reset(seed=SEED)
    with pytest.raises(ValueError, match="shape"):
        physics_env.step(bad)


@pytest.mark.parametrize("chunk", [False, True])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_a_nan_or_inf_action_ends_the_episode_as_policy_error(physics_env, bad, chunk):
    physics_env.reset(seed=SEED)
    physics_env.step(physics_env.rest_action())
    qpos = physics_env.data.qpos.copy()
    action = np.array([0, 0, 0, 0, 0, bad])
    if chunk:
        _, reward, terminated, truncated, info = physics_env.step_chunk(np.stack([physics_env.rest_action(), action]))
        assert info["executed"] == 0
    else:
        _, reward, terminated, truncated, info = physics_env.step(action)
    assert (info["end"], reward, terminated, truncated, info["is_success"]) == ("policy_error", 0.0, True, False, False)
    assert info["steps"] == 1 and np.array_equal(physics_env.data.qpos, qpos)  # nothing simulated
    with pytest.raises(gymnasium.error.ResetNeeded):
        physics_env.step(physics_env.rest_action())


def test_out_of_range_targets_are_clipped(physics_env):
    physics_env.reset(seed=SEED)
    physics_env.step(np.full(6, 1e4, dtype=np.float32))
    ctrl = physics_env.data.ctrl
    upper = physics_env.units.to_rad(physics_env.units.upper)
    assert np.allclose(ctrl, upper)


def test_timed_physics_leaves_the_episode_or_replays_its_steps(physics_env):
    physics_env.reset(seed=5, options={"index": 2})
    chunk = np.linspace(physics_env.state(), physics_env.state() + 20.0, 30)
    start = physics_env.data.qpos.copy()
    assert physics_env.time_physics(chunk) > 0
    np.testing.assert_array_equal(physics_env.data.qpos, start)  # a scratch copy
    assert physics_env.step_chunk(chunk)[-1]["executed"] == len(chunk)
    stepped = physics_env.data.qpos.copy()
    physics_env.reset(seed=5, options={"index": 2})
    physics_env.time_physics(chunk, advance=True)
    np.testing.assert_array_equal(physics_env.data.qpos, stepped)  # the states the episode went through


def test_step_chunk_runs_whole_chunk_and_sums_rewards(physics_env):
    physics_env.reset(seed=SEED, options={"index": 0})
    hold = np.tile(physics_env.rest_action(), (50, 1))
    _, reward, terminated, truncated, info = physics_env.step_chunk(hold)
    assert info["executed"] == 50 and info["steps"] == 50
    assert reward == 0.0 and not terminated and not truncated
    with pytest.raises(ValueError, match="shape"):
        physics_env.step_chunk(np.zeros((50, 5)))


def test_step_chunk_stops_at_the_time_limit():
    environment = ChessEnv(replace(profile("baseline"), render=False, episode_seconds=1.0))
    environment.reset(seed=SEED)
    hold = np.tile(environment.rest_action(), (50, 1))
    _, _, terminated, truncated, info = environment.step_chunk(hold)
    assert info["executed"] == 30 and truncated and not terminated
    assert info["end"] == "timeout"


def test_diverging_simulation_ends_unstable_without_raising(physics_env):
    physics_env.reset(seed=SEED)
    slot = physics_env.scene.slots[physics_env.target_slot]
    physics_env.data.qvel[slot.qvel:slot.qvel + 3] = [1e6, 0.0, 0.0]
    observation, _, terminated, _, info = physics_env.step(physics_env.rest_action())
    assert terminated and info["end"] == "unstable"
    assert np.all(np.isfinite(observation["agent_pos"]))


def test_observations_at_a_policy_size_are_the_resized_frames():
    small = ChessEnv(replace(profile("baseline"), camera=CameraConfig(64, 64, observation_size=24)))
    observation, _ = small.reset(seed=7, options={"index": 2})
    assert small.observation_space["pixels"]["front"].shape == (24, 24, 3)
    frames = small.camera_images()
    assert frames["wrist"].shape == (64, 64, 3)  # videos and datasets keep the frames
    for name in ("front", "wrist"):
        np.testing.assert_array_equal(observation["pixels"][name], resize_image(frames[name], 24, 24))
    small.close()


@pytest.mark.parametrize("corrupt", ["qvel", "qpos"])
def test_a_simulation_that_blows_up_ends_as_unstable(corrupt):
    env = ChessEnv(replace(profile("baseline"), render=False))
    env.reset(seed=7, options={"index": 1})
    piece = env.scene.model.body(env.contacts.bodies[env.target_slot]).jntadr[0]
    if corrupt == "qvel":
        env.data.qvel[env.model.jnt_dofadr[piece]] = 1e12  # MuJoCo resets the data after this step
    else:
        env.data.qpos[env.model.jnt_qposadr[piece]] = np.nan
    _, _, terminated, truncated, info = env.step(env.rest_action())
    assert info["end"] == "unstable" and terminated and not truncated
    assert np.all(np.isfinite(env.state()))


@pytest.mark.parametrize("options, message", [
    ({"index": -1}, "options\\['index'\\] must be a whole number >= 0, got -1"),
    ({"index": "x"}, "options\\['index'\\] must be a whole number >= 0, got 'x'"),
    ({"index": True}, "options\\['index'\\]"),
    ({"idx": 3}, "unknown option idx; known: index, task, assignment"),
    ({"task": "e2e4"}, "options\\['task'\\] must be a chess_sim Task, got str"),
    ({"assignment": [0, 1]}, "options\\['assignment'\\] needs options\\['task'\\]"),
    ([("index", 1)], "options must be a dict, got list")])
def test_reset_refuses_bad_options_in_one_line(options, message):
    env = ChessEnv(replace(profile("baseline"), render=False))
    with pytest.raises(ValueError, match=message) as refused:
        env.reset(seed=7, options=options)
    assert "\n" not in str(refused.value)
    with pytest.raises(ValueError, match="seed must be a whole number >= 0"):
        env.reset(seed=-3)
    env.close()


def test_a_step_before_a_reset_or_after_the_episode_ended_needs_a_reset():
    import gymnasium

    env = ChessEnv(replace(profile("baseline"), render=False, episode_seconds=0.2))
    action = env.action_space.sample()
    with pytest.raises(gymnasium.error.ResetNeeded):
        env.step(action)
    env.reset(seed=7, options={"index": 1})
    ended = False
    while not ended:
        _, _, terminated, truncated, _ = env.step(action)
        ended = terminated or truncated
    with pytest.raises(gymnasium.error.ResetNeeded, match="call reset"):
        env.step(action)
    env.reset(seed=7, options={"index": 1})
    env.step(action)  # a reset lets it step again
    env.close()
