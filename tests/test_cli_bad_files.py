"""Bad files end every verb in one line with exit code 2: outputs that cannot be written (before any work, and no
write ever replaces something that is not a regular file) and damaged inputs."""

import os
import shutil
import time

import pytest

from chess_sim import atomic
from chess_sim.cli import main

UNWRITABLE = "/proc/chess-sim-out"
"""A folder that cannot be created even by root (which passes every permission check)."""

PGN = "tests/games/ruy_lopez_exchange.pgn"


def verbs(policy: str, run: str) -> dict[str, list[str]]:
    """Each verb with its inputs given and its output at UNWRITABLE."""
    return {
        "scene": ["scene", "--out", f"{UNWRITABLE}/scene.png"],
        "expert": ["expert", "--episodes", "1", "--out", UNWRITABLE],
        "record": ["record", "--episodes", "1", "--out", UNWRITABLE],
        "train": ["train", "--dataset", run, "--out", UNWRITABLE],
        "eval": ["eval", "--policy", "expert", "--episodes", "1", "--out", UNWRITABLE],
        "temper": ["temper", "--policy", policy, "--spread", "0.5", "--out", UNWRITABLE],
        "rl": ["rl", "--policy", policy, "--out", UNWRITABLE],
        "rl-check": ["rl-check", "--policy", policy, "--out", UNWRITABLE],
        "play": ["play", "--pgn", PGN, "--policy", "expert", "--out", UNWRITABLE],
        "report": ["report", run, "--out", f"{UNWRITABLE}/report.html"],
    }


@pytest.mark.parametrize("verb", list(verbs("", "")))
def test_an_unwritable_output_is_one_line_before_any_work(verb, tiny_policy_dir, tmp_path, capsys):
    started = time.perf_counter()
    assert main(verbs(str(tiny_policy_dir), str(tmp_path))[verb]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and UNWRITABLE in lines[0] and "cannot be written" in lines[0], lines
    assert time.perf_counter() - started < 20  # refused up front, not after the simulation


@pytest.mark.parametrize("target", ["/dev/null", "folder", "link"])
def test_json_over_a_non_regular_file_is_refused_and_left_alone(target, tmp_path, capsys):
    path = {"/dev/null": "/dev/null", "folder": str(tmp_path), "link": str(tmp_path / "link")}[target]
    if target == "link":
        os.symlink("/dev/null", path)
    assert main(["scene", "--out", str(tmp_path / "scene.png"), "--json", path]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert not (tmp_path / "scene.png").exists()
    assert os.path.exists("/dev/null") and not os.path.isfile("/dev/null")
    if target == "link":
        assert os.path.islink(path)


def test_write_file_never_replaces_a_device_or_a_folder(tmp_path):
    for path in ("/dev/null", tmp_path):
        with pytest.raises(atomic.NotWritable, match="regular file"):
            atomic.write_text(path, "x")
    assert tmp_path.is_dir() and not os.path.isfile("/dev/null")


def test_a_failed_write_names_the_file_and_keeps_the_old_one(tmp_path):
    path = tmp_path / "summary.json"
    atomic.write_text(path, "old")

    def fail(tmp):
        tmp.write_text("half")
        raise OSError(28, "No space left on device")

    with pytest.raises(atomic.NotWritable, match=f"{path} cannot be written: No space left on device"):
        atomic.write_file(path, fail)
    assert path.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]


def test_check_writable_creates_nothing(tmp_path):
    atomic.check_writable(tmp_path / "a" / "b", folder=True)
    atomic.check_writable(tmp_path / "c.json")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(atomic.NotWritable, match="is a file"):
        (tmp_path / "f").write_text("")
        atomic.check_writable(tmp_path / "f" / "out", folder=True)


@pytest.mark.parametrize("damage", ["truncated weights", "garbage config", "config of another shape"])
def test_a_damaged_policy_is_one_line_on_every_verb_that_reads_one(damage, tiny_policy_dir, demos, tmp_path, capsys):
    policy = tmp_path / "policy"
    shutil.copytree(tiny_policy_dir, policy)
    if damage == "truncated weights":
        weights = policy / "model.safetensors"
        weights.write_bytes(weights.read_bytes()[:5])
    elif damage == "garbage config":
        (policy / "config.json").write_bytes(b"\x00\xffnot json")
    else:
        (policy / "config.json").write_text('{"kind": "compact", "config": {"width": "wide"}, "normalizer": {}}')
    runs = [["eval", "--policy", str(policy), "--episodes", "1", "--out", str(tmp_path / "eval")],
            ["train", "--dataset", str(demos), "--init", str(policy), "--steps", "1", "--out", str(tmp_path / "train")],
            ["rl", "--policy", str(policy), "--out", str(tmp_path / "rl")],
            ["temper", "--policy", str(policy), "--spread", "0.5", "--out", str(tmp_path / "temper")],
            ["record", "--policy", str(policy), "--episodes", "1", "--out", str(tmp_path / "record")]]
    for argv in runs:
        assert main(argv) == 2, argv
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and str(policy) in lines[0], (argv, lines)


@pytest.mark.parametrize("argv", [["eval", "--policy", "expert", "--envs", "100000"],
                                  ["rl", "--policy", "POLICY", "--envs", "100000"],
                                  ["record", "--episodes", "1", "--workers", "100000"]])
def test_more_simulators_than_memory_holds_is_one_line_before_any_work(argv, tiny_policy_dir, tmp_path, capsys):
    argv = [str(tiny_policy_dir) if word == "POLICY" else word for word in argv]
    assert main([*argv, "--out", str(tmp_path / "out")]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "100000" in lines[0] and "do not fit in this machine's available memory" in lines[0]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("facts", [b"\x00garbage", b"[]", b'{"saved": [{"episode_index": 99, "recovery": false}]}'],
                         ids=["bytes", "a list", "an episode the dataset lacks"])
def test_training_on_a_recording_with_damaged_facts_is_one_line(facts, demos, tmp_path, capsys):
    dataset = tmp_path / "demos"
    shutil.copytree(demos, dataset)
    (dataset / "meta" / "chess_sim.json").write_bytes(facts)
    assert main(["train", "--dataset", str(dataset), "--steps", "1", "--out", str(tmp_path / "train")]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "meta/chess_sim.json is damaged" in lines[0], lines


def _garbage_inputs(tmp_path, policy):
    """Each verb with an input file that is garbage: {name: argv}."""
    (tmp_path / "g.pgn").write_bytes(b"\x00\xff garbage")
    run = tmp_path / "run"
    (run / "last").mkdir(parents=True)
    (run / "args.json").write_text("{")
    (run / "last" / "rl_state.pt").write_bytes(b"garbage")
    trained = tmp_path / "trained"
    (trained / "last").mkdir(parents=True)
    (trained / "train_args.json").write_text("[]")
    (trained / "last" / "trainer.pt").write_bytes(b"garbage")
    evaluation = tmp_path / "evaluation"
    evaluation.mkdir()
    (evaluation / "summary.json").write_text("x")
    (evaluation / "episodes.csv").write_text("x")
    dataset = tmp_path / "dataset"
    (dataset / "meta").mkdir(parents=True)
    (dataset / "meta" / "info.json").write_text("{not json")
    return {
        "play: a PGN of bytes": ["play", "--pgn", str(tmp_path / "g.pgn"), "--policy", "expert",
                                 "--out", str(tmp_path / "p")],
        "rl: resuming a damaged run": ["rl", "--policy", str(policy), "--out", str(run), "--resume"],
        "rl-check: a damaged run as the policy": ["rl-check", "--policy", str(run), "--out", str(tmp_path / "c")],
        "train: resuming a damaged run": ["train", "--dataset", str(dataset), "--out", str(trained), "--resume"],
        "train: a damaged dataset": ["train", "--dataset", str(dataset), "--out", str(tmp_path / "t")],
        "eval: comparing damaged evaluations": ["eval", "--compare", str(evaluation), str(evaluation)],
        "eval: resuming a damaged evaluation": ["eval", "--policy", "expert", "--out", str(evaluation), "--resume"],
        "record: inspecting a damaged dataset": ["record", "--inspect", str(dataset)],
        "record: resuming a damaged dataset": ["record", "--out", str(dataset), "--resume"],
        "play: a damaged policy": ["play", "--pgn", PGN, "--policy", str(run / "last"), "--out", str(tmp_path / "q")],
    }


GARBAGE_CASES = ["play: a PGN of bytes", "rl: resuming a damaged run", "rl-check: a damaged run as the policy",
                 "train: resuming a damaged run", "train: a damaged dataset", "eval: comparing damaged evaluations",
                 "eval: resuming a damaged evaluation", "record: inspecting a damaged dataset",
                 "record: resuming a damaged dataset", "play: a damaged policy"]


@pytest.mark.parametrize("case", GARBAGE_CASES)
def test_a_garbage_input_file_is_one_line_on_every_verb(case, tiny_policy_dir, tmp_path, capsys):
    argv = _garbage_inputs(tmp_path, tiny_policy_dir)[case]
    assert main(argv) == 2, case
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("chess-sim: error:"), (case, lines)
