"""Imitation training on a tiny recorded dataset: the loss falls, checkpoints load, resume continues."""

import json
from dataclasses import replace

import pytest
import torch

from chess_sim.config import CameraConfig, CompactConfig, TrainConfig, profile
from chess_sim.imitation.bc import TrainError, _clean_episodes, train
from chess_sim.runs import RunError
from chess_sim.policy.compact import CompactPolicy

pytestmark = pytest.mark.slow  # training runs on a recorded dataset

SMALL = CompactConfig(image_size=32, width=32, layers=1, heads=2)
QUICK = TrainConfig(steps=40, batch_size=8, lr=3e-3, warmup_steps=5, val_every=0, val_episodes=0,
                    save_every=20, log_every=5, loader_workers=0)


@pytest.fixture(scope="module")
def dataset(demos):
    return demos


def losses(out):
    return [line for line in map(json.loads, (out / "train_log.jsonl").read_text().splitlines()) if "loss" in line]


@pytest.mark.parametrize("cache_frames", [True, False], ids=["cached", "streamed"])
def test_a_few_steps_lower_the_loss_and_write_loadable_checkpoints(dataset, tmp_path, cache_frames):
    out = tmp_path / "run"
    summary = train(dataset, out, replace(QUICK, cache_frames=cache_frames), SMALL)
    assert summary["steps"] == 40
    logged = losses(out)
    assert logged[-1]["loss"] < 0.6 * logged[0]["loss"]
    policy = CompactPolicy.load(out / "last")
    assert policy.config == SMALL
    assert (out / "last" / "trainer.pt").is_file()


def test_validation_is_an_evaluation_kept_per_step_and_picks_best(dataset, tmp_path):
    out = tmp_path / "run"
    short = replace(profile("baseline"), camera=CameraConfig(64, 64), episode_seconds=1.0)
    train(dataset, out, replace(QUICK, steps=10, val_every=5, val_episodes=2), SMALL, env_cfg=short)
    validations = [line for line in map(json.loads, (out / "train_log.jsonl").read_text().splitlines())
                   if "val_success" in line]
    assert [line["step"] for line in validations] == [5, 10]
    for line in validations:
        summary = json.loads((out / "val" / f"step_{line['step']:06d}" / "summary.json").read_text())
        assert summary["episodes"] == 2 and summary["success"] == line["val_success"]
        assert line["val_success_ci"] == summary["success_ci"]
    assert CompactPolicy.load(out / "best").config == SMALL


def interrupt_at_call(monkeypatch, call: int) -> None:
    """Ctrl-C inside the loss of step `call` (counted from 1), after that step drew its batch and noise."""
    import chess_sim.imitation.bc as bc

    real_loss, calls = bc.flow_matching_loss, []

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == call:
            monkeypatch.setattr(bc, "flow_matching_loss", real_loss)
            raise KeyboardInterrupt
        return real_loss(*args, **kwargs)

    monkeypatch.setattr(bc, "flow_matching_loss", interrupted)


@pytest.mark.parametrize("cache_frames", [True, False], ids=["cached", "streamed"])
def test_interrupted_in_the_middle_of_an_epoch_and_resumed_equals_one_run(dataset, tmp_path, monkeypatch,
                                                                          cache_frames):
    quick = replace(QUICK, cache_frames=cache_frames)
    train(dataset, tmp_path / "whole", quick, SMALL)
    interrupt_at_call(monkeypatch, 24)  # 170 samples, 22 batches an epoch: in the second epoch, between two logs
    with pytest.raises(KeyboardInterrupt):
        train(dataset, tmp_path / "parts", quick, SMALL)
    assert torch.load(tmp_path / "parts" / "last" / "trainer.pt", weights_only=True)["step"] == 23
    assert train(dataset, tmp_path / "parts", quick, SMALL, resume=True)["steps"] == 40
    assert losses(tmp_path / "parts") == losses(tmp_path / "whole")
    a, b = (CompactPolicy.load(tmp_path / name / "last").state_dict() for name in ("whole", "parts"))
    assert all(torch.equal(a[key], b[key]) for key in a)
    with pytest.raises(RunError, match="other settings"):  # only the step budget may change between sittings
        train(dataset, tmp_path / "parts", replace(quick, lr=1e-2), SMALL, resume=True)


def test_a_weight_average_is_what_saves_and_it_resumes_as_one_run(dataset, tmp_path, monkeypatch):
    quick = replace(QUICK, ema=0.9)
    train(dataset, tmp_path / "whole", quick, SMALL)
    interrupt_at_call(monkeypatch, 24)
    with pytest.raises(KeyboardInterrupt):
        train(dataset, tmp_path / "parts", quick, SMALL)
    train(dataset, tmp_path / "parts", quick, SMALL, resume=True)
    assert losses(tmp_path / "parts") == losses(tmp_path / "whole")
    saved, resumed = (CompactPolicy.load(tmp_path / name / "last").state_dict() for name in ("whole", "parts"))
    assert all(torch.equal(saved[key], resumed[key]) for key in saved)
    # the steps are those of a run without the average: its live weights are that run's weights
    train(dataset, tmp_path / "plain", QUICK, SMALL)
    plain = CompactPolicy.load(tmp_path / "plain" / "last").state_dict()
    live = torch.load(tmp_path / "whole" / "last" / "trainer.pt", weights_only=True)["live_policy"]
    assert live and all(torch.equal(live[key], plain[key]) for key in live)
    assert any(not torch.equal(live[key], saved[key]) for key in live)
    with pytest.raises(RunError, match="other settings"):  # the average is part of what the run is
        train(dataset, tmp_path / "parts", replace(quick, ema=0.0), SMALL, resume=True)


def test_interrupted_during_a_validation_and_resumed_equals_one_run(dataset, tmp_path, monkeypatch):
    import chess_sim.imitation.bc as bc

    short = replace(profile("baseline"), camera=CameraConfig(64, 64), episode_seconds=1.0)
    quick = replace(QUICK, steps=20, val_every=10, val_episodes=1)
    train(dataset, tmp_path / "whole", quick, SMALL, env_cfg=short)
    real, calls = bc._validate, []

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(bc, "_validate", interrupted)
    with pytest.raises(KeyboardInterrupt):
        train(dataset, tmp_path / "parts", quick, SMALL, env_cfg=short)
    assert torch.load(tmp_path / "parts" / "last" / "trainer.pt", weights_only=True)["step"] == 10
    summary = train(dataset, tmp_path / "parts", quick, SMALL, env_cfg=short, resume=True)  # validates step 10 first
    assert len(calls) == 3 and summary["steps"] == 20
    log = [(tmp_path / name / "train_log.jsonl").read_text() for name in ("whole", "parts")]
    assert log[0] == log[1]
    a, b = (CompactPolicy.load(tmp_path / name / "last").state_dict() for name in ("whole", "parts"))
    assert all(torch.equal(a[key], b[key]) for key in a)


def test_resuming_a_finished_run_trains_and_decodes_nothing(dataset, tmp_path, monkeypatch):
    out = tmp_path / "run"
    train(dataset, out, QUICK, SMALL)
    weights = (out / "last" / "model.safetensors").read_bytes()
    monkeypatch.setattr("chess_sim.imitation.bc._batches", lambda *args: pytest.fail("decoded frames for no step"))
    summary = train(dataset, out, QUICK, SMALL, resume=True)
    assert summary["steps"] == QUICK.steps and summary["final_loss"] is None
    assert (out / "last" / "model.safetensors").read_bytes() == weights


def test_bad_inputs(dataset, tmp_path):
    with pytest.raises(TrainError, match="not a LeRobot dataset"):
        train(tmp_path / "nothing", tmp_path / "out", QUICK, SMALL)
    with pytest.raises(RunError, match="no run to resume"):
        train(dataset, tmp_path / "fresh", QUICK, SMALL, resume=True)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(RunError, match="not empty"):
        train(dataset, tmp_path / "full", QUICK, SMALL)


def test_clean_episodes_leave_out_recovery_demonstrations(tmp_path):
    (tmp_path / "meta").mkdir()
    assert _clean_episodes(tmp_path, 6) is None  # recorded elsewhere: no facts
    saved = [{"episode_index": i, "recovery": i % 3 == 1} for i in range(6)]
    (tmp_path / "meta" / "chess_sim.json").write_text(json.dumps({"saved": saved}))
    assert _clean_episodes(tmp_path, 6) == [0, 2, 3, 5]
    with pytest.raises(TrainError, match="do not fit the dataset's 5 episodes"):
        _clean_episodes(tmp_path, 5)
