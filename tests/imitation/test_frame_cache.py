"""The in-memory training cache gives what the policy would see when streaming from the videos."""

import pytest
import torch

from chess_sim.imitation.bc import open_dataset
from chess_sim.imitation.frame_cache import CAMERA_KEYS, FrameCache
from chess_sim.policy.compact import resize_images

pytestmark = pytest.mark.slow  # decodes a recorded dataset


@pytest.fixture(scope="module")
def dataset(demos):
    return open_dataset(demos, 50)


def test_cached_batch_matches_streamed_samples(dataset):
    cache = FrameCache(dataset, 32, workers=0, batch_size=7)
    assert len(cache) == len(dataset)
    indices = torch.tensor([0, 5, len(dataset) - 1])
    batch = cache.batch(indices)
    for position, index in enumerate(indices.tolist()):
        sample = dataset[index]
        for key in CAMERA_KEYS:
            expected = resize_images(sample[key][None].float(), 32)[0]
            assert batch[key][position].shape == (3, 32, 32)
            assert (batch[key][position] - expected).abs().max() <= 0.5 / 255 + 1e-6  # uint8 rounding only
        for key in ("observation.state", "action", "action_is_pad"):
            assert torch.equal(batch[key][position], sample[key])
        assert batch["task"][position] == sample["task"]
