"""The simulator's resize against PyTorch's antialiased bilinear interpolation, which the policies use."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from chess_sim.sim.images import _resize_rows, resize_bands, resize_image, resize_matrix


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


@pytest.mark.parametrize("columns", [768, 288])  # the two passes of a 256-pixel frame resized to 96
def test_banded_products_give_the_whole_products_bits(columns):
    # what keeps the observations as they were: bit for bit where the matrix kernel sums each output over its inputs
    # in order (OpenBLAS on the Intel machines the policies were trained on); a CPU whose kernel sums in another
    # order (an AMD EPYC's, for 768 columns) agrees to float32 rounding, and its observations were never those bits
    rng = np.random.default_rng(columns)
    values = np.concatenate([rng.integers(0, 256, (256, columns // 2)), rng.uniform(0, 255, (256, columns // 2))],
                            axis=1).astype(np.float32)
    banded, whole = _resize_rows(values, 96), resize_matrix(256, 96) @ values
    np.testing.assert_allclose(banded, whole, rtol=2e-6)
    same_bits_or_skip(banded, whole, f"(96, 256) @ (256, {columns})")


def same_bits_or_skip(actual: np.ndarray, expected: np.ndarray, product: str) -> None:
    """The bit-for-bit half of a check whose tolerance half has passed: skipped, saying how much differs, on a CPU
    whose matrix kernel sums `product` in another order than the banded products do."""
    if not np.array_equal(actual, expected):
        pytest.skip(f"this CPU's matrix kernel sums {product} in another order: {np.mean(actual != expected):.2%} "
                    f"of the values differ in their last bits")


@pytest.mark.parametrize("source, target", [(100, 37), (100, 33), (48, 96), (240, 128), (5, 2), (5, 1)])
def test_banded_products_are_the_whole_products(source, target):
    values = np.random.default_rng(source).uniform(0, 255, (source, 120)).astype(np.float32)
    np.testing.assert_allclose(_resize_rows(values, target), resize_matrix(source, target) @ values, rtol=2e-6)


def test_bands_cover_every_weight_once():
    matrix = resize_matrix(256, 96)
    rebuilt = np.zeros_like(matrix)
    for first, start, stop, weights in resize_bands(256, 96):
        rebuilt[first:first + len(weights), start:stop] += weights
    np.testing.assert_array_equal(rebuilt, matrix)


def test_an_image_resizes_as_two_whole_matrix_products():
    image = np.random.default_rng(3).integers(0, 256, (256, 192, 3), dtype=np.uint8)
    columns = resize_matrix(192, 96) @ image.transpose(1, 0, 2).reshape(192, -1).astype(np.float32)
    rows = resize_matrix(256, 96) @ columns.reshape(96, 256, 3).transpose(1, 0, 2).reshape(256, -1)
    expected = np.clip(np.rint(rows), 0, 255).astype(np.uint8).reshape(96, 96, 3)
    resized = resize_image(image, 96, 96)
    assert np.abs(resized.astype(int) - expected).max() <= 1  # a rounding flip at most
    same_bits_or_skip(resized, expected, "(96, 256) @ (256, 288)")


@pytest.mark.parametrize("view", [lambda image: image[::-1], lambda image: image[:, :, ::-1],
                                  lambda image: image[1:-1, ::2]])
def test_views_resize_as_their_copies(view):
    image = view(np.random.default_rng(4).integers(0, 256, (66, 130, 3), dtype=np.uint8))
    np.testing.assert_array_equal(resize_image(image, 24, 20), resize_image(np.ascontiguousarray(image), 24, 20))


@pytest.mark.parametrize("channels", [1, 4])
def test_any_channel_count_resizes_channel_by_channel(channels):
    image = np.random.default_rng(channels).integers(0, 256, (64, 48, channels), dtype=np.uint8)
    resized = resize_image(image, 24, 20)
    assert resized.shape == (24, 20, channels)
    for channel in range(channels):
        alone = resize_image(np.repeat(image[:, :, channel:channel + 1], 3, axis=2), 24, 20)
        # within a level, not bit for bit: other column counts may take other matrix kernels
        assert np.abs(resized[:, :, channel].astype(int) - alone[:, :, 0]).max() <= 1
