"""The Ray backend end to end, on a local 2-CPU Ray instance: a noise-free evaluation identical to the local
backend's, an evaluation that survives a killed actor, a recording through Ray actors, and the CLI's one-line
error for an address where no cluster answers."""

from dataclasses import replace

import pytest

from chess_sim.cli import main
from chess_sim.config import CameraConfig, EvalConfig, RecordConfig, profile
from chess_sim.eval import evaluate
from chess_sim.sim.ray_env import RayVecChessEnv

ENV = replace(profile("baseline"), episode_seconds=2.0, camera=CameraConfig(64, 64))
EVAL = EvalConfig(episodes=3, envs=4)


@pytest.fixture(scope="module", autouse=True)
def ray_cluster():
    import ray

    from chess_sim.sim.ray_env import connect

    connect(num_cpus=2)
    yield
    ray.shutdown()


def test_more_simulators_than_cpus_share_fewer_actors():
    import numpy as np

    with RayVecChessEnv(3, ENV) as vec:  # the local instance has 2 CPUs: a third actor could never start
        assert vec.processes == 2 and vec.pid(0) == vec.pid(2) != vec.pid(1)
        resets = vec.reset_many({env: (7, 50 + env) for env in range(3)})
        assert [resets[env][1]["index"] for env in range(3)] == [50, 51, 52]
        hold = np.tile(resets[2][0]["agent_pos"], (50, 1))
        assert vec.step_many({2: hold})[2].info["steps"] == 50


@pytest.mark.slow
def test_a_noise_free_evaluation_on_ray_equals_the_local_one(tiny_policy_dir, tmp_path):
    evaluate(tiny_policy_dir, tmp_path / "local", EVAL, ENV)
    evaluate(tiny_policy_dir, tmp_path / "ray", EVAL, ENV, backend="ray")
    for name in ("episodes.csv", "summary.json"):
        assert (tmp_path / "ray" / name).read_bytes() == (tmp_path / "local" / name).read_bytes()


@pytest.mark.slow
def test_an_actor_killed_mid_episode_is_replaced_and_the_evaluation_completes(tiny_policy_dir, tmp_path,
                                                                                kill_worker_at_step):
    kill_worker_at_step(RayVecChessEnv, 2)
    summary, rows, timing = evaluate(tiny_policy_dir, tmp_path / "killed", EVAL, ENV, backend="ray")
    assert timing.restarts >= 1 and [row["index"] for row in rows] == [0, 1, 2]
    local, _, _ = evaluate(tiny_policy_dir, tmp_path / "local", EVAL, ENV)
    assert summary["ends"] == local["ends"]  # the lost episode was re-run from its start


@pytest.mark.slow
def test_a_recording_through_ray_actors(tmp_path):
    from chess_sim.data.record import record

    summary = record(tmp_path / "data", replace(ENV, episode_seconds=20.0), RecordConfig(recovery_fraction=0.0),
                     7_700_003, 2, workers=2, backend="ray")
    assert summary["episodes_saved"] + summary["episodes_failed"] == 2 and summary["episodes_saved"] >= 1


def test_cli_bad_ray_address_is_one_line(tmp_path, capsys):
    assert main(["eval", "--policy", "expert", "--episodes", "1", "--out", str(tmp_path / "e"),
                 "--ray-address", "127.0.0.1:1"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("chess-sim: error: no Ray cluster answers at 127.0.0.1:1") and "\n" not in error
