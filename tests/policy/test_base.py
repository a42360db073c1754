"""Decision blocks: `pad_rows` and `in_blocks` by hand, and the property they give: a decision computed in blocks of
DECISION_ROWS rows is bit-identical whatever else is in its batch and wherever it sits."""

import numpy as np
import torch

from chess_sim.config import CompactConfig
from chess_sim.policy.base import DECISION_ROWS, Normalizer, in_blocks, observation_batch, pad_rows, sample_chunk
from chess_sim.policy.compact import CompactPolicy


def test_pad_rows_repeats_the_last_row():
    padded = pad_rows({"x": torch.tensor([[1.0], [2.0]]), "task": ["a", "b"]}, rows=4)
    assert padded["x"].tolist() == [[1.0], [2.0], [2.0], [2.0]]
    assert padded["task"] == ["a", "b", "b", "b"]
    full = torch.arange(5.0)
    assert pad_rows(full, rows=4) is full


def test_in_blocks_computes_fixed_size_blocks_and_keeps_the_rows_asked_for():
    sizes = []

    def compute(batch, extra, missing):
        sizes.append((len(batch["task"]), len(extra[0]), missing))
        return {"twice": 2 * batch["x"], "task": batch["task"]}, (extra[0] + 1, extra[1])

    batch = {"x": torch.arange(6.0)[:, None], "task": list("abcdef")}
    out, (plus_one, same) = in_blocks(compute, batch, (torch.arange(6), torch.zeros(6)), None, rows=4)
    assert sizes == [(4, 4, None), (4, 4, None)]  # 6 rows: a full block, then 2 rows padded to 4
    assert out["twice"].flatten().tolist() == [0, 2, 4, 6, 8, 10] and out["task"] == list("abcdef")
    assert plus_one.tolist() == [1, 2, 3, 4, 5, 6] and same.shape == (6,)


def test_a_decision_does_not_depend_on_the_rest_of_its_batch():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    policy = CompactPolicy(CompactConfig(), Normalizer.identity()).eval()  # the default architecture
    count = 12
    # observations as the simulators send them (HxWx3 uint8 frames), so the batch is built as decisions build it
    frames = torch.randint(0, 256, (count, 2, 96, 96, 3), dtype=torch.uint8).numpy()
    states = np.random.default_rng(0).standard_normal((count, 6)) * 10
    observations = [{"pixels": {"front": frames[i, 0], "wrist": frames[i, 1]}, "agent_pos": states[i]}
                    for i in range(count)]
    tasks = ["Move the white pawn from e2 to e4.", "Move the black knight from g8 to f6."] * (count // 2)
    draws = torch.randn(count, policy.chunk, policy.chain_dim)

    def decide(rows: list[int]) -> torch.Tensor:
        picked = observation_batch([observations[i] for i in rows], [tasks[i] for i in rows])
        with torch.no_grad():
            return in_blocks(lambda block, x0: sample_chunk(policy, policy.encode(block), x0), picked, draws[rows])

    alone = torch.cat([decide([i]) for i in range(count)])
    generator = torch.Generator().manual_seed(1)
    for size in (2, 3, DECISION_ROWS, 7, count):
        rows = torch.randperm(count, generator=generator)[:size].tolist()
        assert torch.equal(decide(rows), alone[rows]), f"a batch of {size} changed its decisions"
