"""Training samples decoded once and held in memory at the size the policy looks at.

Training steps then decode no video (two 256 x 256 frames per sample; speed and memory in docs/benchmarks.md). The
cache reads every sample once through LeRobot's loader, resizes the images exactly as the compact policy's `encode`
would (bilinear, antialiased) and keeps them as uint8: 2 * 3 * S * S bytes of images per sample. Batches are then
index lookups. Shapes: N samples, images (N, 3, S, S) uint8, state (N, A), action (N, T, A), action_is_pad (N, T).
"""

from __future__ import annotations

import torch

from chess_sim.policy.compact import resize_images

CAMERA_KEYS = ("observation.images.front", "observation.images.wrist")


class FrameCache:
    def __init__(self, dataset, image_size: int, workers: int = 1, batch_size: int = 64, bar=None):
        """Read all of `dataset` (a LeRobotDataset with action chunks) in order; `bar` (a Progress) advances
        per sample."""
        loader = torch.utils.data.DataLoader(
            dataset, batch_size=batch_size, shuffle=False, num_workers=workers,
            multiprocessing_context="spawn" if workers > 0 else None)
        self.data: dict[str, torch.Tensor] = {}
        ids: dict[str, int] = {}
        self.task_ids = torch.empty(len(dataset), dtype=torch.long)
        filled = 0
        for batch in loader:  # filled in place: no second copy of the frames while they are gathered
            size = len(batch["task"])
            rows = slice(filled, filled + size)
            for key in CAMERA_KEYS:
                scaled = resize_images(batch[key].float(), image_size)
                self._column(key, (3, image_size, image_size), torch.uint8, len(dataset))[rows] = \
                    (scaled * 255.0).round().clamp(0, 255).to(torch.uint8)
            for key in ("observation.state", "action", "action_is_pad"):
                self._column(key, batch[key].shape[1:], batch[key].dtype, len(dataset))[rows] = batch[key]
            self.task_ids[rows] = torch.tensor([ids.setdefault(task, len(ids)) for task in batch["task"]])
            filled += size
            if bar is not None:
                bar.advance(size)
        assert filled == len(dataset), f"the loader gave {filled} samples of {len(dataset)}"
        self.tasks = list(ids)

    def _column(self, key: str, shape, dtype, length: int) -> torch.Tensor:
        if key not in self.data:
            self.data[key] = torch.empty((length, *shape), dtype=dtype)
        return self.data[key]

    def __len__(self) -> int:
        return len(self.task_ids)

    def batch(self, indices: torch.Tensor) -> dict:
        """The samples `indices` as a training batch with LeRobot's keys (images float in [0, 1])."""
        batch = {key: value[indices] for key, value in self.data.items()}
        for key in CAMERA_KEYS:
            batch[key] = batch[key].float() / 255.0
        batch["task"] = [self.tasks[i] for i in self.task_ids[indices].tolist()]
        return batch
