"""DAgger recording: a policy drives, the expert's takeovers from its states are the dataset; they label the policy's
own states, leave its episode untouched, load in LeRobot with their provenance, resume, and train with the
demonstrations."""

from dataclasses import replace

import numpy as np
import pytest
from recorded import episode_arrays, load

from chess_sim.cli import main
from chess_sim.config import CameraConfig, DaggerConfig, RecordConfig, profile
from chess_sim.data.commit import read_progress
from chess_sim.data.record import RecordError, record
from chess_sim.imitation.bc import open_datasets
from chess_sim.imitation.dagger import Dagger

pytestmark = pytest.mark.slow  # every test records real episodes

SEED = 7_700_003
CFG = replace(profile("baseline"), episode_seconds=4.0, camera=CameraConfig(64, 64))
"""The `demos` fixture's cameras; 4 s episodes: three decisions of the policy, so three takeovers."""
TAKEOVER = DaggerConfig(round=2, branch_steps=30)


@pytest.fixture(scope="module")
def dagger_run(tiny_policy_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("dagger") / "round2"
    summary = record(root, CFG, RecordConfig(recovery_fraction=0.0), SEED, 1, workers=1,
                     source=Dagger(str(tiny_policy_dir), TAKEOVER))
    return root, summary


def test_takeovers_load_in_lerobot_with_their_provenance(dagger_run, tiny_policy_dir):
    root, summary = dagger_run
    progress = read_progress(root)
    dataset = load(root)
    assert summary["scenes_attempted"] == 1 and summary["policy_scenes"] == 1
    kept = progress.saved
    assert dataset.num_episodes == len(kept) == summary["episodes_saved"] >= 1
    for entries in (kept, progress.failed):  # written in the order of the policy's decisions
        assert [e["decision"] for e in entries] == sorted(e["decision"] for e in entries)
    for entry in kept:
        assert entry["source"] == "dagger" and entry["round"] == 2 and entry["policy"] == str(tiny_policy_dir)
        assert entry["step"] == 50 * entry["decision"] and entry["end"] in ("success", "running")
        assert entry["frames"] <= TAKEOVER.branch_steps
    assert dataset.num_frames == sum(e["frames"] for e in kept)
    assert progress.driven[0]["decisions"] == 3 and progress.driven[0]["index"] == 0


def test_the_first_takeover_is_the_experts_own_demonstration_from_the_start(dagger_run, demos):
    """Decision 0 is the rest pose: the expert taking over there does what it does in a plain demonstration."""
    root, _ = dagger_run
    first = read_progress(root).saved[0]
    assert first["decision"] == 0
    states, actions = episode_arrays(load(root), first["episode_index"])
    demo_states, demo_actions = episode_arrays(load(demos), 0)
    assert np.array_equal(states, demo_states[:len(states)]) and np.array_equal(actions, demo_actions[:len(actions)])


def test_a_takeover_leaves_the_episode_as_it_was():
    """Mid-episode (80 steps of the expert), a takeover and then the same 40 commands give the same
    states as the 40 commands alone."""
    from copy import deepcopy

    from chess_sim.imitation.dagger import _takeover
    from chess_sim.sim.env import ChessEnv
    from chess_sim.sim.expert import ExpertDriver

    env = ChessEnv(CFG)
    expert = ExpertDriver(env)
    commands, runs = [], []
    for take_over in (False, True):
        env.reset(seed=SEED, options={"index": 0})
        for _ in range(80):
            env.advance(expert.action())
        before = (env.data.qpos.copy(), env.data.qvel.copy(), env.steps, deepcopy(vars(env.judge)))
        if take_over:
            takeover = _takeover(env, expert, 30, 0, {})
            assert len(takeover.action) == 30 and takeover.row["end"] == "running"
            after = (env.data.qpos, env.data.qvel, env.steps, vars(env.judge))
            assert np.array_equal(after[0], before[0]) and np.array_equal(after[1], before[1])
            assert after[2] == before[2] and after[3].keys() == before[3].keys()
            assert all(np.array_equal(after[3][key], value) for key, value in before[3].items())
        states = []
        for step in range(40):
            if not take_over:
                commands.append(expert.action())
            env.advance(commands[step])
            states.append((env.data.qpos.copy(), env.data.qvel.copy()))
        runs.append(states)
    assert all(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) for a, b in zip(*runs))
    env.close()


def test_a_takeover_the_expert_gives_up_on_is_recorded_as_failed(monkeypatch):
    """An expert that finds no plan holds still: 30 frames of an unmoving arm are no demonstration."""
    from chess_sim.imitation.dagger import GAVE_UP, _takeover
    from chess_sim.sim.env import ChessEnv
    from chess_sim.sim.expert import ExpertDriver

    env = ChessEnv(CFG)
    expert = ExpertDriver(env)
    env.reset(seed=SEED, options={"index": 0})
    monkeypatch.setattr(expert.expert, "_reachable", lambda pose: False)
    takeover = _takeover(env, expert, 30, 0, {})
    assert takeover.row["end"] == GAVE_UP and GAVE_UP not in Dagger.kept_ends
    env.close()


def test_a_resumed_dagger_recording_equals_an_uninterrupted_one(tiny_policy_dir, tmp_path):
    dagger, rec = Dagger(str(tiny_policy_dir), TAKEOVER), RecordConfig(recovery_fraction=0.0)
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    record(whole, CFG, rec, SEED, 2, workers=1, source=dagger)
    record(parts, CFG, rec, SEED, 2, workers=1, source=dagger, stop_after=1)
    assert not read_progress(parts).finished
    with pytest.raises(RecordError, match="another seed, profile or recording settings"):
        record(parts, CFG, rec, SEED, 2, workers=1, resume=True, source=Dagger(str(tiny_policy_dir), DaggerConfig()))
    record(parts, CFG, rec, SEED, 2, workers=1, resume=True, source=dagger)
    a, b = read_progress(whole), read_progress(parts)
    assert (a.saved, a.failed, a.driven) == (b.saved, b.failed, b.driven) and b.finished
    for episode in range(load(whole).num_episodes):
        for x, y in zip(episode_arrays(load(whole), episode), episode_arrays(load(parts), episode)):
            assert np.array_equal(x, y)


def test_demonstrations_and_takeovers_train_as_one_dataset(dagger_run, demos):
    root, _ = dagger_run
    pooled, stats = open_datasets([demos, root], 50)
    single = [open_datasets([path], 50)[0] for path in (demos, root)]
    assert len(pooled) == sum(len(dataset) for dataset in single)
    assert pooled[len(single[0])]["task"] == single[1][0]["task"]
    assert stats["action"]["count"] == sum(dataset.meta.stats["action"]["count"] for dataset in single)


def test_cli_refuses_takeover_flags_without_a_policy_and_a_bad_policy(tmp_path, capsys):
    assert main(["record", "--episodes", "1", "--out", str(tmp_path / "a"), "--branch-steps", "5"]) == 2
    assert main(["record", "--episodes", "1", "--out", str(tmp_path / "b"), "--policy", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "need --policy" in err[0] and "no config.json" in err[1]
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
