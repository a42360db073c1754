"""Batch padding: `pad_rows` by hand, and the property it relies on: from MIN_ROWS rows up, every row of a batch
is computed bit-identically whatever the batch size and the row's position."""

import torch

from chess_sim.config import CompactConfig
from chess_sim.policy.base import MIN_ROWS, Normalizer, pad_rows, sample_chunk
from chess_sim.policy.compact import CompactPolicy


def test_pad_rows_repeats_the_last_row():
    padded = pad_rows({"x": torch.tensor([[1.0], [2.0]]), "task": ["a", "b"]}, rows=4)
    assert padded["x"].tolist() == [[1.0], [2.0], [2.0], [2.0]]
    assert padded["task"] == ["a", "b", "b", "b"]
    full = torch.arange(5.0)
    assert pad_rows(full, rows=4) is full


def test_a_decision_does_not_depend_on_the_rest_of_its_batch():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    policy = CompactPolicy(CompactConfig(), Normalizer.identity()).eval()  # the default architecture
    count = 12
    batch = {"observation.images.front": torch.rand(count, 3, 96, 96),
             "observation.images.wrist": torch.rand(count, 3, 96, 96),
             "observation.state": torch.randn(count, 6) * 10,
             "task": ["Move the white pawn from e2 to e4.", "Move the black knight from g8 to f6."] * (count // 2)}
    draws = torch.randn(count, policy.chunk, policy.chain_dim)

    def decide(rows: list[int]) -> torch.Tensor:
        picked = {name: [value[i] for i in rows] if name == "task" else value[rows] for name, value in batch.items()}
        with torch.no_grad():
            return sample_chunk(policy, policy.encode(pad_rows(picked)), pad_rows(draws[rows]))[:len(rows)]

    alone = torch.cat([decide([i]) for i in range(count)])
    generator = torch.Generator().manual_seed(1)
    for size in (2, 3, MIN_ROWS, 7, count):
        rows = torch.randperm(count, generator=generator)[:size].tolist()
        assert torch.equal(decide(rows), alone[rows]), f"a batch of {size} changed its decisions"
