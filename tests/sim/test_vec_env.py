"""VecChessEnv, on both backends (worker processes and Ray actors on a local 2-CPU Ray instance): parallel
simulators match a local env; a killed worker is replaced and its episode re-run; a refused command is raised;
a Ray address where no cluster answers is a one-line error."""

import os
import signal
from dataclasses import replace

import numpy as np
import pytest

from chess_sim.config import CameraConfig, profile
from chess_sim.sim.env import ChessEnv
from chess_sim.sim.vec_env import VecChessEnv, make_vec_env

CFG = replace(profile("baseline"), camera=CameraConfig(64, 64))
SEED = 7_700_003


@pytest.fixture(scope="module")
def ray_cluster():
    import ray

    from chess_sim.sim.ray_env import connect

    connect(num_cpus=2)
    yield
    ray.shutdown()


@pytest.fixture(scope="module", params=["local", "ray"])
def vec(request):
    if request.param == "ray":
        request.getfixturevalue("ray_cluster")
    environments = make_vec_env(2, CFG, seconds=4.0, backend=request.param)
    yield environments
    environments.close()


def hold_chunk(env):
    return np.tile(env.rest_action(), (50, 1))


def test_workers_match_a_local_env(vec):
    local = ChessEnv(replace(CFG, episode_seconds=4.0))
    resets = vec.reset_many({0: (SEED, 3), 1: (SEED, 4)})
    observation, info = local.reset(seed=SEED, options={"index": 4})
    assert resets[1][1]["instruction"] == info["instruction"]
    assert np.array_equal(resets[1][0]["agent_pos"], observation["agent_pos"])
    assert np.array_equal(resets[1][0]["pixels"]["front"], observation["pixels"]["front"])
    chunk = hold_chunk(local)
    stepped = vec.step_many({0: chunk, 1: chunk})
    expected = local.step_chunk(chunk)
    assert np.array_equal(stepped[1].observation["agent_pos"], expected[0]["agent_pos"])
    assert stepped[1].info["executed"] == 50 and not stepped[1].terminated


def test_killed_worker_is_restarted_and_its_episode_rerun(vec):
    local = ChessEnv(replace(CFG, episode_seconds=4.0))
    local.reset(seed=SEED, options={"index": 5})
    vec.reset_many({0: (SEED, 5), 1: (SEED, 6)})
    chunk = hold_chunk(local)
    vec.step_many({0: chunk, 1: chunk})
    before = vec.restarts
    os.kill(vec.pid(0), signal.SIGKILL)
    stepped = vec.step_many({0: chunk, 1: chunk})
    assert vec.restarts == before + 1
    assert stepped[0].info["restarted"] is True and stepped[0].info["index"] == 5
    assert np.array_equal(stepped[0].observation["agent_pos"], local.reset(seed=SEED, options={"index": 5})[0]
                          ["agent_pos"])
    assert "restarted" not in stepped[1].info and stepped[1].info["steps"] == 100
    again = vec.step_many({0: chunk})  # the restarted worker goes on normally
    assert again[0].info["steps"] == 50


def test_needs_a_worker():
    with pytest.raises(ValueError, match="at least one worker"):
        VecChessEnv(0, CFG)


def test_a_refused_command_is_raised_not_restarted(vec):
    vec.reset_many({0: (SEED, 7)})
    before = vec.restarts
    with pytest.raises(RuntimeError, match="ValueError: action contains NaN"):
        vec.step_many({0: np.full((50, 6), np.nan)})
    assert vec.restarts == before


def test_an_unknown_backend_is_refused():
    with pytest.raises(ValueError, match="unknown simulator backend 'mpi'"):
        make_vec_env(1, CFG, backend="mpi")


@pytest.mark.parametrize("address, words", [("127.0.0.1:1", "no Ray cluster answers at 127.0.0.1:1"),
                                            ("nowhere", "must be auto or HOST:PORT")])
def test_a_ray_address_without_a_cluster_is_a_one_line_error(address, words):
    from chess_sim.sim.ray_env import RayBackendError, connect

    with pytest.raises(RayBackendError, match=words) as caught:
        connect(address)
    assert "\n" not in str(caught.value)
