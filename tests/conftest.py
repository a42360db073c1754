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


LEROBOT_IMAGE_SIZE = 32
"""Camera side of the tiny LeRobot policies the tests build (`save_lerobot_policy`)."""


def tiny_act_config(**overrides):
    """A LeRobot ACTConfig small enough for the fast tier (no backbone weights are fetched)."""
    from lerobot.policies.act.configuration_act import ACTConfig

    fields = dict(device="cpu", pretrained_backbone_weights=None, chunk_size=10, n_action_steps=4, dim_model=32,
                  dim_feedforward=64, n_heads=2, n_encoder_layers=1, n_decoder_layers=1, latent_dim=8)
    return ACTConfig(**{**fields, **overrides})


def save_lerobot_policy(config, directory):
    """A randomly initialised LeRobot policy of `config` (chess-sim's cameras at `LEROBOT_IMAGE_SIZE`, state and
    action) with its processors, written as `lerobot-train` writes a checkpoint; returns `directory`."""
    import torch
    from lerobot.policies.factory import get_policy_class, make_pre_post_processors

    from chess_sim.policy.smolvla import input_features

    bounds = {"min": torch.full((6,), -90.0), "max": torch.full((6,), 90.0)}
    stats = {"observation.state": {"mean": torch.zeros(6), "std": torch.full((6,), 30.0), **bounds},
             "action": {"mean": torch.zeros(6), "std": torch.full((6,), 20.0), **bounds},
             **{f"observation.images.{name}": {"mean": torch.full((3, 1, 1), 0.5), "std": torch.full((3, 1, 1), 0.25)}
                for name in ("front", "wrist")}}
    config.input_features, config.output_features = input_features(LEROBOT_IMAGE_SIZE)
    torch.manual_seed(0)
    get_policy_class(config.type)(config).save_pretrained(directory)
    for processor in make_pre_post_processors(config, dataset_stats=stats):
        processor.save_pretrained(directory)
    return directory


@pytest.fixture(scope="session")
def tiny_act_dir(tmp_path_factory):
    """A randomly initialised tiny LeRobot ACT checkpoint (`tiny_act_config`). Read-only for the tests."""
    return save_lerobot_policy(tiny_act_config(), tmp_path_factory.mktemp("act"))


@pytest.fixture(scope="session")
def lerobot_policies():
    """The builders of tiny LeRobot policies: (`tiny_act_config`, `save_lerobot_policy`, `LEROBOT_IMAGE_SIZE`)."""
    return tiny_act_config, save_lerobot_policy, LEROBOT_IMAGE_SIZE


@pytest.fixture
def kill_worker_at_step(monkeypatch):
    """`kill_worker_at_step(vec_class, call)`: the `call`-th batch of commands with chunks to step (or to decide
    and step) that any `vec_class` is sent first SIGKILLs simulator 0's process, so a test sees a worker die
    mid-episode."""
    import signal

    def arm(vec_class, call: int) -> None:
        original, calls = vec_class.submit, []

        def submit_and_kill(self, commands):
            if any(command in ("step", "act") for command, _ in commands.values()):
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
