"""Antialiased image resizing in NumPy, for observations made in the simulator at a policy's input size.

The weights are PyTorch's `interpolate(mode="bilinear", antialias=True, align_corners=False)`: a triangle filter
stretched by the scale factor when shrinking, normalised per output pixel, applied separably. The compact policy
and its training cache resize with PyTorch; resizing here gives the same pixels without torch in the simulator
(`sim` never imports it) and sends a 96-pixel observation through the pipe instead of a 256-pixel one.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np


@lru_cache(maxsize=16)
def resize_matrix(source: int, target: int) -> np.ndarray:
    """(target, source) float32 weights: row i holds output pixel i's weights over the input pixels."""
    if source < 1 or target < 1:
        raise ValueError(f"image sizes must be positive, got {source} -> {target}")
    scale = source / target
    support = scale if scale >= 1.0 else 1.0
    inverse = 1.0 / scale if scale >= 1.0 else 1.0
    weights = np.zeros((target, source), dtype=np.float64)
    for i in range(target):
        centre = scale * (i + 0.5)
        first = max(int(centre - support + 0.5), 0)
        last = min(int(centre + support + 0.5), source)
        taps = np.arange(first, last)
        row = np.clip(1.0 - np.abs((taps - centre + 0.5) * inverse), 0.0, None)
        weights[i, first:last] = row / row.sum()
    weights = weights.astype(np.float32)
    weights.setflags(write=False)  # cached and shared: nobody may change it
    return weights


BAND_ROWS = 8
"""Output pixels per band of `resize_bands` (the fastest of 4-32 for 256 -> 96 on one core)."""


@lru_cache(maxsize=16)
def resize_bands(source: int, target: int) -> tuple[tuple[int, int, int, np.ndarray], ...]:
    """`resize_matrix(source, target)` cut into bands of `BAND_ROWS` output pixels, each band (first output, first
    input, last input + 1, its weights over those inputs): the inputs outside a band have zero weight in all its
    rows."""
    matrix = resize_matrix(source, target)
    bands = []
    for first in range(0, target, BAND_ROWS):
        rows = matrix[first:first + BAND_ROWS]
        used = np.flatnonzero(rows.any(axis=0))
        weights = np.ascontiguousarray(rows[:, used[0]:used[-1] + 1])
        weights.setflags(write=False)
        bands.append((first, int(used[0]), int(used[-1]) + 1, weights))
    return tuple(bands)


def _resize_rows(values: np.ndarray, target: int) -> np.ndarray:
    """(source, M) float32 -> (target, M) float32: `resize_matrix(source, target) @ values`, each band multiplying
    only the inputs it weighs (for 256 -> 96, ~24 of 256: a tenth of the arithmetic). A zero weight adds nothing to a
    running sum, so where the matrix kernel sums each output over its inputs in order, one block, the bands give the
    whole product's bits: OpenBLAS does for 256 -> 96, the observations' shape, on the Intel machines the policies
    were trained on (`tests/sim/test_images.py` checks the bits); other shapes, and other CPUs (an AMD EPYC's for
    768 columns), may take kernels that sum in another order, and agree to float32 rounding. The order is
    what matters: sparse-matrix libraries and other summation orders round some resized values the other way,
    which changes outcomes as any change of the observation does."""
    out = np.empty((target, values.shape[1]), dtype=np.float32)
    for first, start, stop, weights in resize_bands(values.shape[0], target):
        np.matmul(weights, values[start:stop], out=out[first:first + len(weights)])
    return out


def _swap_axes(image: np.ndarray) -> np.ndarray:
    """(H, W, C) -> a contiguous (W, H, C) copy, moving each pixel's C values as one item (several times faster
    than NumPy's element-wise transposed copy)."""
    height, width, channels = image.shape
    pixel = np.dtype((np.void, channels * image.itemsize))
    moved = np.ascontiguousarray(np.ascontiguousarray(image).view(pixel).reshape(height, width).T)
    return moved.view(image.dtype).reshape(width, height, channels)


def resize_image(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """(H, W, C) uint8 -> (height, width, C) uint8, antialiased bilinear, rounded to the nearest level: the columns,
    then the rows, each a float32 matrix product (`_resize_rows`; ~0.3 ms for 256 -> 96 on one core)."""
    if image.shape[:2] == (height, width):
        return image.copy()
    source_height, source_width, channels = image.shape
    by_column = _swap_axes(image).astype(np.float32).reshape(source_width, source_height * channels)
    narrow = _swap_axes(_resize_rows(by_column, width).reshape(width, source_height, channels))
    resized = _resize_rows(narrow.reshape(source_height, width * channels), height).reshape(height, width, channels)
    return np.clip(np.rint(resized), 0, 255).astype(np.uint8)
