"""`threads.torch_threads`: the block's thread count, and the caller's restored after it."""

import pytest
import torch

from chess_sim.threads import torch_threads


@pytest.fixture
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_the_block_runs_on_the_count_and_the_callers_returns(one_thread):
    with torch_threads(2):
        assert torch.get_num_threads() == 2
    assert torch.get_num_threads() == 1


def test_none_leaves_the_count_as_it_is(one_thread):
    with torch_threads(None):
        assert torch.get_num_threads() == 1
        torch.set_num_threads(2)
    assert torch.get_num_threads() == 1


def test_the_callers_count_returns_when_the_block_raises(one_thread):
    with pytest.raises(RuntimeError, match="inside"):
        with torch_threads(2):
            raise RuntimeError("inside")
    assert torch.get_num_threads() == 1
