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
from chess_sim.sim.backends import make_vec_env
from chess_sim.sim.vec_env import VecChessEnv

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
    with pytest.raises(RuntimeError, match="ValueError: action chunk must have shape"):
        vec.step_many({0: np.zeros((50, 5))})
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


def test_a_chunk_that_ends_its_episode_goes_on_with_the_scene_held_in_reserve(vec):
    local = ChessEnv(replace(CFG, episode_seconds=4.0))
    vec.reset_many({0: (SEED, 7)})
    chunk = hold_chunk(local)
    for _ in range(2):  # 100 of the episode's 120 steps: the reserved scene is not taken
        assert vec.collect(vec.submit({0: ("step", (chunk, False, (SEED, 8)))}))[0].next_episode is None
    ended = vec.collect(vec.submit({0: ("step", (chunk, False, (SEED, 8)))}))[0]
    assert ended.truncated and ended.info["index"] == 7 and ended.info["executed"] == 20
    observation, info = ended.next_episode
    assert info["index"] == 8
    assert np.array_equal(observation["pixels"]["front"], local.reset(seed=SEED, options={"index": 8})[0]
                          ["pixels"]["front"])
    os.kill(vec.pid(0), signal.SIGKILL)  # a restart now re-runs the scene the simulator went on with
    restarted = vec.step_many({0: chunk})[0]
    assert restarted.info["restarted"] is True and restarted.info["index"] == 8


@pytest.fixture(scope="module")
def shared():
    """Four simulators in two processes: simulators 0 and 2 share one, 1 and 3 the other."""
    environments = VecChessEnv(4, CFG, seconds=4.0, processes=2)
    yield environments
    environments.close()


def test_simulators_sharing_a_process_match_local_envs(shared):
    assert shared.processes == 2 and shared.pid(0) == shared.pid(2) != shared.pid(1)
    locals_ = {env: ChessEnv(replace(CFG, episode_seconds=4.0)) for env in (0, 2)}
    resets = shared.reset_many({env: (SEED, 10 + env) for env in range(4)})
    for env, local in locals_.items():
        observation, info = local.reset(seed=SEED, options={"index": 10 + env})
        assert resets[env][1]["index"] == 10 + env
        assert np.array_equal(resets[env][0]["pixels"]["wrist"], observation["pixels"]["wrist"])
    chunk = hold_chunk(locals_[0])
    chunk[:, 0] += 5.0  # simulator 2 turns a little: the two episodes of one process must stay apart
    stepped = shared.step_many({0: hold_chunk(locals_[0]), 2: chunk})
    np.testing.assert_array_equal(stepped[0].observation["agent_pos"],
                                  locals_[0].step_chunk(hold_chunk(locals_[0]))[0]["agent_pos"])
    np.testing.assert_array_equal(stepped[2].observation["agent_pos"], locals_[2].step_chunk(chunk)[0]["agent_pos"])


def test_a_dead_process_restarts_every_episode_it_held(shared):
    shared.reset_many({env: (SEED, 20 + env) for env in range(4)})
    chunk = np.tile(ChessEnv(CFG).rest_action(), (50, 1))
    shared.step_many({env: chunk for env in range(4)})
    before = shared.restarts
    os.kill(shared.pid(0), signal.SIGKILL)
    stepped = shared.step_many({0: chunk, 1: chunk})  # simulator 2 lives in the dead process but is not asked
    assert shared.restarts == before + 1
    assert stepped[0].info["restarted"] is True and stepped[0].info["index"] == 20
    assert "restarted" not in stepped[1].info
    later = shared.step_many({2: chunk, 3: chunk})
    assert later[2].info["restarted"] is True and later[2].info["index"] == 22 and later[2].reward == 0.0
    assert later[3].info["steps"] == 100
    assert shared.step_many({2: chunk})[2].info["steps"] == 50  # then it goes on normally


def test_a_new_episode_replaces_a_pending_restart(shared):
    shared.reset_many({env: (SEED, 30 + env) for env in range(4)})
    os.kill(shared.pid(1), signal.SIGKILL)
    chunk = np.tile(ChessEnv(CFG).rest_action(), (50, 1))
    assert shared.step_many({1: chunk})[1].info["restarted"] is True
    observation, info = shared.reset_many({3: (SEED, 40)})[3]  # simulator 3's re-run episode is replaced
    assert info["index"] == 40 and "restarted" not in info
    assert shared.step_many({3: chunk})[3].info["steps"] == 50



def test_local_capacity_is_available_memory_less_the_processes_in_simulators(tmp_path, monkeypatch):
    from chess_sim.sim import backends

    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24000000 kB\nMemAvailable:   8192000 kB\n")
    monkeypatch.setattr(backends.os, "cpu_count", lambda: 2)
    assert backends.local_capacity(meminfo) == (8000 - 2 * backends.PROCESS_MB) // backends.SIMULATOR_MB
    assert backends.local_capacity(tmp_path / "missing") is None
