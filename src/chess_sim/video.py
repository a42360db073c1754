"""Episode videos: both cameras side by side, the instruction on top, the outcome on the closing frames."""

from __future__ import annotations

from pathlib import Path

import imageio.v2 as imageio
import numpy as np
from PIL import Image, ImageDraw, ImageFont

BANNER = 24
"""Pixels of the text strip above the images."""
OUTCOME_SECONDS = 1.0
"""The final frame is held this long with the outcome written on it."""


class EpisodeVideo:
    """Streams frames to an mp4 (H.264 through imageio-ffmpeg); `close(outcome)` writes the closing frames."""

    def __init__(self, path: Path, instruction: str, fps: int = 30):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = self.path.with_name(f".{self.path.stem}.tmp.mp4")
        self.instruction = instruction
        self.fps = fps
        self.writer = imageio.get_writer(self.tmp, fps=fps, codec="libx264", quality=7, macro_block_size=8,
                                         ffmpeg_log_level="error")
        self.last: np.ndarray | None = None
        self.frames = 0

    def add(self, cameras: dict[str, np.ndarray], step: int) -> None:
        self.last = np.concatenate([cameras[name] for name in sorted(cameras)], axis=1)
        self.writer.append_data(_caption(self.last, f"{self.instruction}  t={step / self.fps:4.1f}s"))
        self.frames += 1

    def add_chunk(self, info: dict) -> None:
        """The frames of a filmed chunk (`info["frames"]`, taken out of `info`), each at its control step."""
        for offset, frames in enumerate(info.pop("frames")):
            self.add(frames, info["steps"] - info["executed"] + offset + 1)

    def discard(self) -> None:
        """Drop an unfinished video (its episode is being re-run)."""
        self.writer.close()
        self.tmp.unlink(missing_ok=True)

    def hold(self, outcome: str) -> None:
        """Hold the last frame `OUTCOME_SECONDS` with the outcome written on it (a game's video: after each move)."""
        if self.last is not None:
            final = _caption(self.last, f"{self.instruction}  -> {outcome.upper()}")
            for _ in range(round(OUTCOME_SECONDS * self.fps)):
                self.writer.append_data(final)
                self.frames += 1

    def close(self, outcome: str) -> Path:
        self.hold(outcome)
        self.writer.close()
        self.tmp.replace(self.path)
        return self.path


def _caption(image: np.ndarray, text: str) -> np.ndarray:
    canvas = Image.new("RGB", (image.shape[1], image.shape[0] + BANNER), (20, 20, 20))
    canvas.paste(Image.fromarray(image), (0, BANNER))
    ImageDraw.Draw(canvas).text((6, 4), text, fill=(240, 240, 240), font=ImageFont.load_default())
    return np.asarray(canvas)
