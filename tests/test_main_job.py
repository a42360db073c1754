"""The README's main job (`scripts/main_job.sh`): an end-to-end smoke with tiny sizes, and its refusals of bad sizes."""

import json
import os
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "main_job.sh"
TINY = {"MINUTES": "0.01", "RL_EPISODES": "2", "VAL_EPISODES": "2", "TEST_EPISODES": "2"}


@pytest.mark.slow  # the README's main job end to end
def test_main_job_runs_rl_report_and_the_paired_comparison(tmp_path):
    out = tmp_path / "main"
    done = subprocess.run([str(SCRIPT), str(out)], env={**os.environ, **TINY}, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (out / "rl" / "best" / "model.safetensors").is_file()
    assert (out / "rl" / "report.html").is_file()
    comparison = json.loads((out / "comparison.json").read_text())
    assert comparison["episodes"] == 2 and 0.0 <= comparison["mcnemar_p"] <= 1.0
    assert (out / "rl" / "last" / "start.json").is_file()  # the baseline's start spread goes with the fine-tuned policy
    assert "last = iteration" in done.stdout and "RL profile: main, algorithm filtered" in done.stdout
    run = json.loads((out / "rl" / "args.json").read_text())  # the profile sizes what the environment leaves unset
    assert run["profile"] == "main" and run["rl"]["algorithm"] == "filtered"
    assert run["rl"]["run"]["iterations"] == 3 and run["rl"]["optim"]["ema"] == 0.0
    assert (run["rl"]["run"]["episodes"], run["rl"]["run"]["val_episodes"], run["rl"]["run"]["minutes"]) == (2, 2, 0.01)
    again = subprocess.run([str(SCRIPT), str(out)], env={**os.environ, **TINY}, capture_output=True, text=True,
                           timeout=60)
    assert again.returncode == 2 and again.stderr.count("\n") == 1 and "already exists" in again.stderr


@pytest.mark.parametrize("name, value, message", [("MINUTES", "0", "MINUTES must be a positive"),
                                                  ("ITERATIONS", "0", "ITERATIONS must be a positive whole"),
                                                  ("ITERATIONS", "2.5", "ITERATIONS must be a positive whole")])
def test_main_job_refuses_a_bad_size(tmp_path, name, value, message):
    done = subprocess.run([str(SCRIPT), str(tmp_path / "main")], env={**os.environ, **TINY, name: value},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and message in done.stderr and not (tmp_path / "main").exists()
