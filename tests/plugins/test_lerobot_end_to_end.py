"""Offline end to end with LeRobot's own tools: record 2 episodes -> `lerobot-train` ACT (no pretrained backbone,
a few steps) -> `lerobot-eval --env.type=chess_sim` -> `chess-sim eval --policy` of the same checkpoint, which
must agree episode by episode."""

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
EPISODES = 2


def run(*argv, cwd):
    # lerobot-eval's policy on as many threads as chess-sim eval's (half the cores): the thread count changes the
    # last bits of a policy's actions, and a contact-rich trajectory can then end otherwise
    threads = str(max(1, (os.cpu_count() or 1) // 2))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl"),
           "OMP_NUM_THREADS": threads}
    result = subprocess.run([str(BIN / argv[0]), *argv[1:]], cwd=cwd, env=env, capture_output=True, text=True)
    assert result.returncode == 0, f"{argv[0]} failed:\n{result.stderr[-3000:]}"


@pytest.mark.slow
def test_record_lerobot_train_lerobot_eval_and_chess_sim_eval_agree(tmp_path):
    dataset, trained = tmp_path / "demos", tmp_path / "act"
    run("chess-sim", "record", "--episodes", "2", "--recovery", "0", "--out", str(dataset), cwd=tmp_path)
    run("lerobot-train", f"--dataset.repo_id=chess-sim/{dataset.name}", f"--dataset.root={dataset}",
        "--policy.type=act", "--policy.pretrained_backbone_weights=null", "--policy.push_to_hub=false",
        "--policy.device=cpu", "--policy.chunk_size=50", "--policy.n_action_steps=50", "--policy.dim_model=64",
        "--policy.dim_feedforward=128", "--policy.n_encoder_layers=1", "--policy.n_decoder_layers=1",
        "--steps=4", "--batch_size=2", "--save_freq=4", "--num_workers=0", "--wandb.enable=false",
        f"--output_dir={trained}", cwd=tmp_path)
    checkpoint = trained / "checkpoints" / "last" / "pretrained_model"

    run("lerobot-eval", "--env.type=chess_sim", f"--policy.path={checkpoint}", "--policy.device=cpu",
        f"--eval.n_episodes={EPISODES}", "--eval.batch_size=1", "--seed=0", f"--output_dir={tmp_path / 'lerobot'}",
        cwd=tmp_path)
    overall = json.loads((tmp_path / "lerobot" / "eval_info.json").read_text())
    metrics = overall["per_task"][0]["metrics"]
    assert overall["overall"]["n_episodes"] == EPISODES and "pc_success" in overall["overall"]

    run("chess-sim", "eval", "--policy", str(checkpoint), "--episodes", str(EPISODES), "--envs", "2",
        "--out", str(tmp_path / "ours"), cwd=tmp_path)
    with open(tmp_path / "ours" / "episodes.csv") as file:
        rows = list(csv.DictReader(file))
    assert [row["end"] == "success" for row in rows] == metrics["successes"]
    assert [float(row["return"]) for row in rows] == pytest.approx(metrics["sum_rewards"], abs=1e-6)
    summary = json.loads((tmp_path / "ours" / "summary.json").read_text())
    assert 100 * summary["success"] == pytest.approx(overall["overall"]["pc_success"])
