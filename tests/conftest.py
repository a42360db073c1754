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
