"""Readers of a recorded dataset shared by the recording tests (importable: pytest puts `tests/` on the path for its
conftest)."""

import numpy as np
from lerobot.datasets.lerobot_dataset import LeRobotDataset


def load(root):
    return LeRobotDataset(f"chess-sim/{root.name}", root=root)


def episode_arrays(dataset, episode):
    """(states, actions) of one episode, each (T, 6)."""
    frames = dataset.hf_dataset.filter(lambda row: row["episode_index"] == episode)
    return np.stack(frames["observation.state"]), np.stack(frames["action"])
