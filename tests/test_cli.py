"""End-to-end CLI smoke tests with tiny budgets, and bad input."""

import json
import subprocess
import sys

import pytest
from PIL import Image

from chess_sim.cli import main


def test_scene_writes_three_views(tmp_path):
    out = tmp_path / "scene.png"
    assert main(["scene", "--seed", "5_500_001", "--index", "2", "--out", str(out),
                 "--json", str(tmp_path / "scene.json")]) == 0
    image = Image.open(out)
    assert image.size == (3 * 256, 256)
    task = json.loads((tmp_path / "scene.json").read_text())
    assert task["index"] == 2 and task["instruction"].startswith("Move the ")


def test_scene_of_the_all_pieces_tasks(tmp_path):
    out = tmp_path / "scene.png"
    assert main(["scene", "--tasks", "all-pieces", "--seed", "5500001", "--index", "3", "--out", str(out),
                 "--json", str(tmp_path / "scene.json")]) == 0
    task = json.loads((tmp_path / "scene.json").read_text())
    assert task["instruction"] == "Move the black rook from a8 to a7." and task["piece"] == "rook"


@pytest.mark.slow
def test_expert_runs_and_writes_summary_csv_and_video(tmp_path):
    summary_path = tmp_path / "summary.json"
    assert main(["expert", "--episodes", "2", "--workers", "2", "--video", "1", "--out", str(tmp_path),
                 "--json", str(summary_path)]) == 0
    summary = json.loads(summary_path.read_text())
    for key in ("episodes", "success", "return", "clean_lift", "disturbed", "toppled", "success_pawn",
                "success_knight", "close_mm_median"):
        assert key in summary
    assert summary["episodes"] == 2
    assert len((tmp_path / "episodes.csv").read_text().strip().splitlines()) == 3
    assert (tmp_path / "videos" / "episode_0000.mp4").stat().st_size > 10_000


@pytest.mark.parametrize("argv, words", [
    (["expert", "--episodes", "0"], "expected a number >= 1"),
    (["expert", "--episodes", "two"], "expected a whole number"),
    (["scene", "--seed", "-3"], "expected a number >= 0"),
    (["expert", "--profile", "nope"], "invalid choice"),
    (["eval", "--tasks", "every-piece"], "invalid choice"),
    (["record", "--tasks", "castling"], "invalid choice"),
    (["fly"], "invalid choice"),
])
def test_bad_arguments_give_one_line_and_exit_2(argv, words):
    result = subprocess.run([sys.executable, "-m", "chess_sim.cli", *argv], capture_output=True, text=True)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0] and lines[0].startswith("chess-sim: error:")


def test_output_path_that_is_a_directory_is_refused(tmp_path, capsys):
    assert main(["scene", "--out", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err


@pytest.mark.slow
def test_record_and_inspect_smoke(tmp_path, capsys):
    out = tmp_path / "ds"
    assert main(["record", "--episodes", "1", "--workers", "1", "--recovery", "0", "--out", str(out),
                 "--json", str(tmp_path / "rec.json")]) == 0
    summary = json.loads((tmp_path / "rec.json").read_text())
    assert summary["episodes_saved"] + summary["episodes_failed"] == 1 and summary["finished"]
    assert main(["record", "--inspect", str(out)]) == 0
    assert "episodes" in capsys.readouterr().out


@pytest.mark.parametrize("argv, words", [
    (["record", "--episodes", "1"], "needs --out"),
    (["record", "--out", "ds"], "needs --episodes"),
    (["record", "--episodes", "1", "--out", "ds", "--recovery", "1.5"], "expected a number in [0, 1]"),
    (["record", "--inspect", "."], "not a LeRobot dataset"),
    (["record", "--episodes", "1", "--out", "ds", "--vcodec", "bogus"], "--vcodec bogus --vpreset ultrafast: the "
                                                                        "installed encoder refuses them"),
    (["record", "--episodes", "1", "--out", "ds", "--vpreset", "bogus"], "preset/tune bogus"),
])
def test_record_bad_input_is_one_line(argv, words, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0]
    assert not (tmp_path / "ds").exists()  # refused before anything was simulated or written


@pytest.mark.parametrize("info", ["{not json", '{"fps": 30}'], ids=["not-json", "no-lerobot-fields"])
def test_inspecting_damaged_metadata_is_one_line(info, tmp_path, capsys):
    (tmp_path / "meta").mkdir()
    (tmp_path / "meta" / "info.json").write_text(info)
    assert main(["record", "--inspect", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "damaged LeRobot metadata" in err[0]


def test_record_refuses_a_non_empty_directory(tmp_path, capsys):
    (tmp_path / "keep.txt").write_text("mine")
    assert main(["record", "--episodes", "1", "--out", str(tmp_path)]) == 2
    assert "not empty" in capsys.readouterr().err
    assert (tmp_path / "keep.txt").read_text() == "mine"  # nothing lost


def test_scene_needs_an_image_file_name(tmp_path, capsys):
    assert main(["scene", "--out", str(tmp_path / "scene")]) == 2
    assert "expected an image file name" in capsys.readouterr().err


def test_expert_out_that_is_a_file_is_refused_before_running(tmp_path, capsys):
    target = tmp_path / "results"
    target.write_text("keep")
    assert main(["expert", "--episodes", "1", "--workers", "1", "--out", str(target)]) == 2
    assert "is a file" in capsys.readouterr().err and target.read_text() == "keep"


@pytest.mark.slow
def test_record_into_an_existing_empty_directory(tmp_path):
    out = tmp_path / "empty"
    out.mkdir()
    assert main(["record", "--episodes", "1", "--workers", "1", "--recovery", "0", "--out", str(out)]) == 0
    assert (out / "meta" / "info.json").is_file()


@pytest.mark.slow
def test_train_smoke_and_bad_dataset(tmp_path, capsys):
    data = tmp_path / "demos"
    assert main(["record", "--episodes", "1", "--workers", "1", "--recovery", "0", "--out", str(data)]) == 0
    out = tmp_path / "policy"
    assert main(["train", "--dataset", str(data), "--out", str(out), "--steps", "2", "--batch-size", "4",
                 "--val-episodes", "0", "--json", str(tmp_path / "train.json")]) == 0
    assert json.loads((tmp_path / "train.json").read_text())["steps"] == 2
    assert (out / "last" / "model.safetensors").is_file()
    streamed = tmp_path / "streamed"
    assert main(["train", "--dataset", str(data), "--out", str(streamed), "--steps", "2", "--batch-size", "4",
                 "--val-episodes", "0", "--no-cache-frames", "--no-recovery"]) == 0
    saved = json.loads((streamed / "train_args.json").read_text())["train"]
    assert saved["cache_frames"] is False and saved["recovery"] is False
    capsys.readouterr()
    assert main(["train", "--dataset", str(tmp_path / "none"), "--out", str(tmp_path / "p2")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a LeRobot dataset" in err[0]


@pytest.mark.parametrize("verb, tree", [("rl", "RLProfile"), ("train", "TrainConfig"), ("eval", "EvalConfig"),
                                        ("record", "RecordConfig")])
def test_help_lists_every_config_field_once_with_its_default(verb, tree, capsys):
    import re

    import chess_sim.config as config
    from chess_sim.cli_args import leaf_fields

    with pytest.raises(SystemExit):
        main([verb, "--help"])
    text = capsys.readouterr().out
    renames = {"recovery_fraction": "recovery", "videos": "video"}
    for _, _, field in leaf_fields(getattr(config, tree)):
        flag = "--" + renames.get(field.name, field.name).replace("_", "-")
        listed = re.findall(rf"^  {re.escape(flag)}(?=[ ,\n])", text, flags=re.MULTILINE)
        assert len(listed) == 1, (flag, listed)
    assert text.count("[default:") >= len(leaf_fields(getattr(config, tree)))
    text = " ".join(text.split())
    if verb == "rl":  # the flags of every algorithm's config, each profile's value where it differs
        assert "--chain-dtype {float32,bfloat16}" in text and "--steer, --no-steer" in text
        assert "[default: 100; compact 512; main 224]" in text
        assert "--algorithm {ppo,filtered}" in text and "[default: ppo; compact filtered; main filtered]" in text


def test_a_policy_config_with_a_wrong_type_is_one_line(tmp_path, capsys):
    from chess_sim.config import CompactConfig
    from chess_sim.policy.base import Normalizer
    from chess_sim.policy.compact import CompactPolicy

    policy = tmp_path / "policy"
    CompactPolicy(CompactConfig(width=32, layers=1, heads=2, image_size=32, steps=2), Normalizer.identity()).save(policy)
    config = json.loads((policy / "config.json").read_text())
    config["config"]["chunk"] = "abc"
    (policy / "config.json").write_text(json.dumps(config))
    assert main(["eval", "--policy", str(policy), "--episodes", "1", "--out", str(tmp_path / "eval")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "chunk must be an integer, got 'abc'" in err[0]


@pytest.mark.parametrize("verb", ["eval", "rl", "record"])
def test_a_policy_without_captures_is_refused_on_captures_in_one_line(verb, tiny_policy_dir, tmp_path, capsys):
    out = tmp_path / "out"
    extra = ["--episodes", "1"] if verb != "rl" else []
    assert main([verb, "--policy", str(tiny_policy_dir), "--tasks", "captures", "--out", str(out), *extra]) == 2
    assert "reads no capture instructions" in capsys.readouterr().err
    assert not out.exists()


def test_temper_saves_the_policy_with_its_spread_and_refuses_bad_input_in_one_line(tiny_policy_dir, tmp_path, capsys):
    from chess_sim.policy.loading import load_policy
    from chess_sim.policy.start import SteeredPolicy

    out = tmp_path / "tempered"
    assert main(["temper", "--policy", str(tiny_policy_dir), "--spread", "0.5", "--out", str(out)]) == 0
    tempered = load_policy(out)
    assert isinstance(tempered, SteeredPolicy) and abs(float(tempered.start.std().detach()) - 0.5) < 1e-6
    capsys.readouterr()
    for argv, words in [(["--policy", str(out), "--spread", "0.5", "--out", str(tmp_path / "again")],
                         "already has its own start"),
                        (["--policy", str(tiny_policy_dir), "--spread", "5", "--out", str(tmp_path / "wide")],
                         "must be within"),
                        (["--policy", str(tiny_policy_dir), "--spread", "0.5", "--out", str(out)], "is not empty"),
                        (["--policy", str(tmp_path / "missing"), "--spread", "0.5", "--out", str(tmp_path / "m")],
                         "not a policy directory")]:
        assert main(["temper", *argv]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and words in err[0]
    assert not (tmp_path / "again").exists() and not (tmp_path / "wide").exists()
    rl_out = tmp_path / "rl"
    assert main(["rl", "--policy", str(out), "--initial-spread", "0.7", "--out", str(rl_out)]) == 2
    assert "brings its own" in capsys.readouterr().err and not rl_out.exists()
