import os

import pytest

os.environ.setdefault("MUJOCO_GL", "egl")


@pytest.fixture(scope="session")
def tiny_policy_dir(tmp_path_factory):
    """A randomly initialised, very small compact policy (identity normaliser with a 20-degree action scale), so
    rollouts move the arm a little without a trained model. Read-only for the tests."""
    import torch

    from chess_sim.config import CompactConfig
    from chess_sim.policy.base import Normalizer
    from chess_sim.policy.compact import CompactPolicy

    torch.manual_seed(0)
    normalizer = Normalizer.identity()
    normalizer.action_std = torch.full((6,), 20.0)
    directory = tmp_path_factory.mktemp("tiny_policy")
    CompactPolicy(CompactConfig(width=32, layers=1, heads=2, image_size=32, steps=3), normalizer).save(directory)
    return directory


@pytest.fixture
def kill_worker_at_step(monkeypatch):
    """`kill_worker_at_step(vec_class, call)`: the `call`-th batch of commands with chunks to step that any
    `vec_class` is sent first SIGKILLs simulator 0's process, so a test sees a worker die mid-episode."""
    import signal

    def arm(vec_class, call: int) -> None:
        original, calls = vec_class.submit, []

        def submit_and_kill(self, commands):
            if any(command == "step" for command, _ in commands.values()):
                calls.append(1)
                if len(calls) == call:
                    os.kill(self.pid(0), signal.SIGKILL)
            return original(self, commands)

        monkeypatch.setattr(vec_class, "submit", submit_and_kill)

    return arm


@pytest.fixture(scope="session")
def demos(tmp_path_factory):
    """One clean expert episode at 64 x 64 pixels, recorded once for every policy and imitation test."""
    from dataclasses import replace

    from chess_sim.config import CameraConfig, RecordConfig, profile
    from chess_sim.data.record import record

    root = tmp_path_factory.mktemp("policy") / "demos"
    record(root, replace(profile("baseline"), camera=CameraConfig(64, 64)), RecordConfig(recovery_fraction=0.0),
           7_700_003, 1, workers=1)
    return root
