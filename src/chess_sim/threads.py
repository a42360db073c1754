"""Torch's thread count for one block of work."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


@contextmanager
def torch_threads(count: int | None) -> Iterator[None]:
    """Run the block on `count` torch threads (None: leave the count as it is), then restore the caller's count,
    also when the block raises: a thread count changes a policy's last bits, so it must not leak into later work."""
    before = torch.get_num_threads()
    if count is not None:
        torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)
