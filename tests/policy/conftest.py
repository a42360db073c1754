from dataclasses import replace

import pytest

from chess_sim.config import CameraConfig, RecordConfig, profile
from chess_sim.data.record import record


@pytest.fixture(scope="session")
def demos(tmp_path_factory):
    """One clean expert episode at 64 x 64 pixels, recorded once for every policy test."""
    root = tmp_path_factory.mktemp("policy") / "demos"
    record(root, replace(profile("baseline"), camera=CameraConfig(64, 64)), RecordConfig(recovery_fraction=0.0),
           7_700_003, 1, workers=1)
    return root
