"""The fault tier: each long-running verb is killed with SIGKILL at random moments (seeded, at most three kills,
each within the first 70% of the work an uninterrupted run did), then resumed to the end; what it leaves must equal
an uninterrupted run's: nothing lost, nothing repeated."""

import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.slow  # each verb runs three to five times in fresh processes

RUNNER = Path(__file__).with_name("fault_runner.py")
TIMING = {"rollout_s", "rollout_parts", "update_s", "elapsed_s", "val_seconds", "seconds", "steps_per_s"}


def run_verb(verb, out, policy, dataset, resume=False, kill_after=None) -> tuple[bool, float]:
    """Run the verb in a fresh process group; kill it `kill_after` seconds after its first file appears in `out`
    (the moment its own work starts, whatever the imports cost on this machine). Returns whether it finished, and
    how long it worked: from that first file to its end."""
    argv = [sys.executable, str(RUNNER), verb, str(out), str(policy), str(dataset)]
    argv += ["--resume"] if resume else []
    before = set(out.rglob("*")) if out.exists() else set()
    with tempfile.TemporaryFile() as err:
        process = subprocess.Popen(argv, start_new_session=True, stdout=subprocess.DEVNULL, stderr=err)
        started, deadline = None, time.monotonic() + 600
        while process.poll() is None:
            now = time.monotonic()
            if started is None and out.exists() and set(out.rglob("*")) - before:
                started = now
            if now > deadline or (kill_after is not None and started is not None and now - started > kill_after):
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                return False, 0.0
            time.sleep(0.02)
        err.seek(0)
        assert process.returncode == 0, err.read().decode()[-2000:]
    return True, time.monotonic() - (started or time.monotonic())


def killed_and_resumed(verb, out, policy, dataset, seed: int, work_seconds: float) -> int:
    """Kill the verb up to three times at seeded random moments, each within the first 70% of the `work_seconds`
    an uninterrupted run needed, and resume it to the end; returns how many kills landed."""
    rng = random.Random(seed)
    kills = 0
    finished, _ = run_verb(verb, out, policy, dataset, kill_after=rng.uniform(0.1, 0.7) * work_seconds)
    while not finished:
        kills += 1
        moment = rng.uniform(0.1, 0.7) * work_seconds if kills < 3 else None
        started = out.exists() and any(out.iterdir())  # as a user would: an empty folder is started afresh
        finished, _ = run_verb(verb, out, policy, dataset, resume=started, kill_after=moment)
    return kills


def lines(path: Path) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if k not in TIMING} for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def dataset(demos):
    return demos


def test_eval_killed_and_resumed_equals_one_run(tiny_policy_dir, dataset, tmp_path):
    _, work = run_verb("eval", tmp_path / "whole", tiny_policy_dir, dataset)
    kills = killed_and_resumed("eval", tmp_path / "parts", tiny_policy_dir, dataset, seed=1, work_seconds=work)
    assert kills >= 1
    for name in ("episodes.csv", "summary.json"):
        assert (tmp_path / "parts" / name).read_bytes() == (tmp_path / "whole" / name).read_bytes()


@pytest.mark.parametrize("verb, log, seed", [("rl", "log.jsonl", 2), ("train", "train_log.jsonl", 3)])
def test_a_weight_changing_run_killed_and_resumed_equals_one_run(tiny_policy_dir, dataset, tmp_path, verb, log, seed):
    from chess_sim.policy.compact import CompactPolicy

    _, work = run_verb(verb, tmp_path / "whole", tiny_policy_dir, dataset)
    kills = killed_and_resumed(verb, tmp_path / "parts", tiny_policy_dir, dataset, seed=seed, work_seconds=work)
    assert kills >= 1
    assert lines(tmp_path / "parts" / log) == lines(tmp_path / "whole" / log)
    a = CompactPolicy.load(tmp_path / "parts" / "last").state_dict()
    b = CompactPolicy.load(tmp_path / "whole" / "last").state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_record_killed_and_resumed_equals_one_run(tiny_policy_dir, dataset, tmp_path):
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    from chess_sim.data.integrity import checked_metadata
    from chess_sim.data.commit import encoder_leftovers, read_progress

    _, work = run_verb("record", tmp_path / "whole", tiny_policy_dir, dataset)
    kills = killed_and_resumed("record", tmp_path / "parts", tiny_policy_dir, dataset, seed=4, work_seconds=work)
    assert kills >= 1
    whole, parts = read_progress(tmp_path / "whole"), read_progress(tmp_path / "parts")
    assert parts.finished and len(whole.saved) >= 1
    assert parts.saved == whole.saved and parts.failed == whole.failed
    assert encoder_leftovers(tmp_path / "parts") == []
    checked_metadata(tmp_path / "parts")  # every file the episodes name is there and readable
    a, b = (LeRobotDataset(f"chess-sim/{name}", root=tmp_path / name) for name in ("whole", "parts"))
    assert a.num_frames == b.num_frames
    for column in ("observation.state", "action", "episode_index", "frame_index"):
        assert torch.equal(torch.stack(list(a.hf_dataset[column])), torch.stack(list(b.hf_dataset[column])))
