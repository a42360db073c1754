"""The simulator's resize against PyTorch's antialiased bilinear interpolation, which the policies use."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from chess_sim.sim.images import resize_image, resize_matrix


@pytest.mark.parametrize("source, target", [(256, 96), (100, 37), (64, 128), (96, 96), (5, 2)])
def test_weights_are_pytorchs(source, target):
    identity = torch.eye(source)[None, None]
    expected = F.interpolate(identity, size=(source, target), mode="bilinear", antialias=True, align_corners=False)
    np.testing.assert_allclose(resize_matrix(source, target).T, expected[0, 0].numpy(), atol=2e-6)


def test_an_image_resizes_as_the_policy_would_to_within_rounding():
    image = np.random.default_rng(0).integers(0, 256, (64, 48, 3), dtype=np.uint8)
    ours = resize_image(image, 24, 20).astype(np.float64)
    tensor = torch.from_numpy(image).permute(2, 0, 1)[None].double()
    theirs = F.interpolate(tensor, size=(24, 20), mode="bilinear", antialias=True, align_corners=False)
    theirs = theirs[0].permute(1, 2, 0).numpy()
    assert np.abs(ours - theirs).max() <= 0.5 + 1e-3  # rounded to the nearest level


def test_hand_weights_for_halving():
    # 4 -> 2: output 0 is centred at input coordinate 1.0, a triangle of half-width 2 over inputs 0..2 (centres
    # 0.5, 1.5, 2.5): weights 0.75, 0.75, 0.25, normalised by 1.75; output 1 mirrors it
    np.testing.assert_allclose(resize_matrix(4, 2), np.array([[3, 3, 1, 0], [0, 1, 3, 3]]) / 7, atol=1e-6)


def test_sizes_must_be_positive():
    with pytest.raises(ValueError, match="positive"):
        resize_matrix(0, 3)
