"""The run plumbing every weight-changing run shares: new or resumable folders, the same-arguments check, atomic
checkpoints, and state files that cannot run code when read back."""

import json
import pickle
from pathlib import Path

import pytest
import torch

from chess_sim.runs import RunError, check_same_args, load_state, open_run, save_checkpoint, trim_log, write_args


class _Trap:
    """Unpickling this would create a file: what a hostile state file could do."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return Path.touch, (self.marker,)


class _Policy:
    def save(self, directory):
        (Path(directory) / "config.json").write_text("{}")


def test_a_new_run_needs_an_empty_folder_and_a_resume_needs_a_started_run(tmp_path):
    assert open_run(tmp_path / "new", resume=False, state_file="state.pt", args_file="args.json") is False
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "x").write_text("x")
    with pytest.raises(RunError, match="not empty"):
        open_run(tmp_path / "used", resume=False, state_file="state.pt", args_file="args.json")
    with pytest.raises(RunError, match="no run to resume"):
        open_run(tmp_path / "used", resume=True, state_file="state.pt", args_file="args.json")
    write_args(tmp_path / "used" / "args.json", {"lr": 1})  # killed before its first checkpoint: starts again
    assert open_run(tmp_path / "used", resume=True, state_file="state.pt", args_file="args.json") is False
    save_checkpoint(tmp_path / "used" / "last", _Policy(), {"step": 3}, "state.pt")
    assert open_run(tmp_path / "used", resume=True, state_file="state.pt", args_file="args.json") is True
    assert load_state(tmp_path / "used" / "last" / "state.pt") == {"step": 3}


def test_a_state_file_that_would_run_code_is_refused(tmp_path):
    marker = tmp_path / "ran"
    path = tmp_path / "state.pt"
    with open(path, "wb") as handle:
        pickle.dump({"step": 1, "trap": _Trap(marker)}, handle, protocol=2)
    with pytest.raises(RunError, match="cannot be read as a checkpoint"):
        load_state(path)
    assert not marker.exists()
    torch.save({"optimizer": {"state": {0: {"exp_avg": torch.ones(2)}}}, "generator": torch.Generator().get_state()},
               path)
    assert torch.equal(load_state(path)["optimizer"]["state"][0]["exp_avg"], torch.ones(2))


def test_resume_accepts_only_the_same_arguments_but_a_longer_budget(tmp_path):
    path = tmp_path / "args.json"
    write_args(path, {"train": {"steps": 10, "lr": 1e-3, "seed": 0}, "dataset": "d"})
    compared = lambda args: {**args, "train": {**args["train"], "steps": 0}}  # noqa: E731
    check_same_args(path, {"train": {"steps": 40, "lr": 1e-3, "seed": 0}, "dataset": "d"}, compared, "--steps")
    with pytest.raises(RunError, match=r"other settings \(lr, seed\).*--steps may change"):
        check_same_args(path, {"train": {"steps": 40, "lr": 1e-2, "seed": 1}, "dataset": "d"}, compared, "--steps")
    with pytest.raises(RunError, match="older chess-sim"):
        check_same_args(path, {}, lambda args: args["run"], "--steps")
    path.write_text("{torn")
    with pytest.raises(RunError, match="missing or damaged"):
        check_same_args(path, {"train": {"steps": 40, "lr": 1e-3}}, compared, "--steps")


def test_trim_log_keeps_the_lines_the_checkpoint_holds(tmp_path):
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps({"step": step}) + "\n" for step in (1, 2, 3)) + '{"step": 4')
    trim_log(log, "step", 2)
    assert [json.loads(line)["step"] for line in log.read_text().splitlines()] == [1, 2]
