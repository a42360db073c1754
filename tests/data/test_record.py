"""Recording expert episodes as a LeRobot dataset: loads in LeRobot, replays, resumes identically."""

import os
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest
from recorded import episode_arrays, load

from chess_sim.config import CameraConfig, RecordConfig, profile
from chess_sim.data.commit import read_progress
from chess_sim.data.record import RecordError, inspect, record
from chess_sim.sim.env import ChessEnv

pytestmark = pytest.mark.slow  # every test records real episodes (35 s for the shared fixture)

SEED = 7_700_003
CFG = replace(profile("baseline"), camera=CameraConfig(64, 64))


@pytest.fixture(scope="module")
def two_episodes(tmp_path_factory):
    root = tmp_path_factory.mktemp("ds") / "two"
    summary = record(root, CFG, RecordConfig(recovery_fraction=0.0), SEED, 2, workers=1)
    return root, summary


def test_dataset_loads_back_in_lerobot(two_episodes):
    root, summary = two_episodes
    dataset = load(root)
    progress = read_progress(root)
    assert dataset.num_episodes == 2 == summary["episodes_saved"]
    assert dataset.num_frames == sum(e["frames"] for e in progress.saved) == summary["frames_this_run"]
    assert dataset.fps == 30
    item = dataset[0]
    assert item["observation.images.front"].shape == (3, 64, 64)
    assert item["observation.images.wrist"].shape == (3, 64, 64)
    assert item["observation.state"].shape == (6,) and item["action"].shape == (6,)
    assert str(item["observation.state"].dtype) == "torch.float32"
    assert item["task"] == progress.saved[0]["instruction"]
    last = dataset[dataset.num_frames - 1]
    assert last["task"] == progress.saved[1]["instruction"] and int(last["episode_index"]) == 1
    assert dataset.meta.features["action"]["names"][0] == "shoulder_pan.pos"


def test_recorded_actions_replayed_open_loop_reproduce_the_outcome(two_episodes):
    root, _ = two_episodes
    dataset = load(root)
    progress = read_progress(root)
    env = ChessEnv(replace(CFG, render=False))
    for episode, meta in enumerate(progress.saved):
        states, actions = episode_arrays(dataset, episode)
        observation, _ = env.reset(seed=meta["scene_seed"], options={"index": meta["scene_index"]})
        assert np.array_equal(observation["agent_pos"], states[0])
        for action in actions:
            _, _, terminated, truncated, info = env.step(action)
        assert (terminated or truncated) and info["end"] == meta["end"] == "success"


def test_interrupted_then_resumed_equals_one_uninterrupted_run(tmp_path):
    rec = RecordConfig(recovery_fraction=1.0)  # noisy execution must resume identically too
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    record(whole, CFG, rec, SEED, 3, workers=1)
    record(parts, CFG, rec, SEED, 3, workers=1, stop_after=1)
    assert not read_progress(parts).finished
    assert load(parts).num_episodes == 1  # loadable as it stands after the stop
    with pytest.raises(RecordError, match="--resume"):
        record(parts, CFG, rec, SEED, 3, workers=1)
    # what a hard kill during the next episode can leave: a half-written file, LeRobot's image folder and its
    # streaming encoder's temporary videos (a folder of the user's own beside them stays)
    (parts / "data" / "chunk-000" / "file-001.parquet").write_bytes(b"PAR1 half")
    (parts / "images").mkdir()
    for stream in ("front", "wrist"):
        (parts / f"tmp_{stream}").mkdir()
        (parts / f"tmp_{stream}" / f"observation.images.{stream}_streaming.mp4").write_bytes(b"\0" * 64)
    (parts / "tmp_notes").mkdir()
    (parts / "tmp_notes" / "mine.txt").write_text("keep")
    summary = record(parts, CFG, rec, SEED, 3, workers=1, resume=True)
    assert summary["finished"]
    assert sorted(path.name for path in parts.glob("tmp*")) == ["tmp_notes"]
    a, b = load(whole), load(parts)
    assert a.num_episodes == b.num_episodes and a.num_frames == b.num_frames
    assert read_progress(whole).saved == read_progress(parts).saved
    assert all(e["recovery"] for e in read_progress(whole).saved)
    for episode in range(a.num_episodes):
        for x, y in zip(episode_arrays(a, episode), episode_arrays(b, episode)):
            assert np.array_equal(x, y)


class TwoPerScene:
    """A scene source writing the expert's demonstration of each scene twice (the shape of a DAgger scene: several
    episodes per scene, committed with the scene)."""

    kept_ends = ("success",)

    def settings(self):
        return {"two_per_scene": True}

    def setup(self):
        return None

    def scene(self, env, expert, state, seed, index):
        from chess_sim.data.record import record_episode

        episode = record_episode(env, expert, seed, index, RecordConfig(recovery_fraction=0.0))
        return [episode, episode], {"end": "success"}

    @staticmethod
    def summary(rows):
        return {"rows": len(rows)}


def test_ctrl_c_inside_a_scene_rolls_back_to_the_scene_start(tmp_path, monkeypatch):
    import chess_sim.data.record as recorder

    rec = RecordConfig(recovery_fraction=0.0)
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    assert record(whole, CFG, rec, SEED, 2, workers=1, source=TwoPerScene())["rows"] == 2
    save, calls = recorder._save, []

    def save_then_interrupt(*args):
        calls.append(1)
        if len(calls) == 4:  # the second episode of the second scene
            raise KeyboardInterrupt
        return save(*args)

    monkeypatch.setattr(recorder, "_save", save_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        record(parts, CFG, rec, SEED, 2, workers=1, source=TwoPerScene())
    monkeypatch.setattr(recorder, "_save", save)
    assert load(parts).num_episodes == len(read_progress(parts).saved) == 2  # not 3: the scene is rolled back
    record(parts, CFG, rec, SEED, 2, workers=1, resume=True, source=TwoPerScene())
    assert read_progress(parts).saved == read_progress(whole).saved and load(parts).num_frames == load(whole).num_frames


def test_non_empty_directory_and_wrong_resume_are_refused(tmp_path, two_episodes):
    (tmp_path / "other.txt").write_text("x")
    with pytest.raises(RecordError, match="not empty"):
        record(tmp_path, CFG, RecordConfig(), SEED, 1, workers=1)
    with pytest.raises(RecordError, match="no chess-sim recording"):
        record(tmp_path, CFG, RecordConfig(), SEED, 1, workers=1, resume=True)
    root, _ = two_episodes
    with pytest.raises(RecordError, match="another seed"):
        record(root, CFG, RecordConfig(recovery_fraction=0.0), SEED + 1, 2, workers=1, resume=True)


def test_inspect_reports_episodes_and_instructions(two_episodes):
    root, _ = two_episodes
    report = inspect(root)
    assert report["episodes"] == 2 and report["finished"]
    assert len(report["instructions"]) >= 1 and report["instructions"][0].startswith("Move the ")
    assert set(report["stats"]) == {"observation.state", "action"}
    assert report["features"]["observation.images.front"]["shape"] == [64, 64, 3]


def test_inspect_printed_into_a_closed_pipe_ends_quietly(two_episodes):
    """`chess-sim record --inspect DIR | head -1`: the reader leaves early, the report stops without a traceback."""
    root, _ = two_episodes
    reader, writer = os.pipe()
    os.close(reader)
    done = subprocess.run([sys.executable, "-m", "chess_sim.cli", "record", "--inspect", str(root)], stdout=writer,
                          stderr=subprocess.PIPE, text=True, timeout=120)
    os.close(writer)
    assert done.returncode == 0 and done.stderr == ""
