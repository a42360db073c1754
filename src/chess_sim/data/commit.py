"""Crash-safe commits of a recording: the progress record beside LeRobot's shared metadata.

After every saved episode the writer is finalised (parquet footers and metadata on disk) and
resumed, so each episode lives in its own data and video files and earlier files are never touched again.
Then a commit copies LeRobot's small shared metadata files (`info.json`, `stats.json`, `tasks.parquet`)
together with our progress record into `meta/chess_sim_commit/`, swapped in by renames. A run that stops
early is refused by the next run unless told `resume`; resuming restores the committed metadata, deletes the
files of any episode after the last commit (what a hard kill may have left half-written) and goes on.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

from chess_sim import atomic

PROGRESS_FILE = "meta/chess_sim.json"
"""A readable copy of the progress record, per-episode metadata included."""
COMMIT_DIR = "meta/chess_sim_commit"
SHARED_META = ("info.json", "stats.json", "tasks.parquet")
"""LeRobot metadata files rewritten by every saved episode (the per-episode files are new each time)."""
FORMAT = 1


@dataclass
class Progress:
    """Contents of `meta/chess_sim.json`."""

    seed: int
    episodes: int
    env: dict
    record: dict
    next_index: int = 0
    finished: bool = False
    saved: list = None
    failed: list = None
    driven: list = None
    """With a scene source (DAgger), its row per scene: the driving policy's own outcome."""

    def __post_init__(self):
        self.saved = self.saved or []
        self.failed = self.failed or []
        self.driven = self.driven or []


def commit(root: Path, progress: Progress) -> None:
    """Atomically record `progress` together with the current shared LeRobot metadata."""
    meta = root / "meta"
    text = json.dumps({"format": FORMAT, **asdict(progress)}, indent=1)

    def write(staging: Path) -> None:
        for name in SHARED_META:
            if (meta / name).is_file():
                shutil.copy2(meta / name, staging / name)
        (staging / "progress.json").write_text(text)

    atomic.write_dir(root / COMMIT_DIR, write)
    atomic.write_text(root / PROGRESS_FILE, text)


def read_progress(root: Path) -> Progress | None:
    """The last committed progress of the recording in `root`, or None if there is none."""
    committed = Path(root) / COMMIT_DIR
    atomic.recover_dir(committed)
    path = committed / "progress.json"
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    data.pop("format", None)
    return Progress(**data)


def roll_back_to_commit(root: Path, progress: Progress) -> None:
    """Restore the committed shared metadata and delete every file of an episode saved after the commit.
    Episode k (0-based, in the dataset) owns file index k of `data/`, each video stream and `meta/episodes/`."""
    committed = root / COMMIT_DIR
    for name in SHARED_META:
        if (committed / name).is_file():
            shutil.copy2(committed / name, root / "meta" / name)
    info = json.loads((root / "meta" / "info.json").read_text())
    chunk_size = int(info.get("chunks_size", 1000))
    saved = len(progress.saved)
    for folder in ("data", "videos", "meta/episodes"):
        for path in sorted((root / folder).rglob("file-*.*")):
            chunk = int(path.parent.name.split("-")[1])
            if chunk * chunk_size + int(path.stem.split("-")[1]) >= saved:
                path.unlink()
    shutil.rmtree(root / "images", ignore_errors=True)
    for leftover in encoder_leftovers(root):
        shutil.rmtree(leftover)


def encoder_leftovers(root: Path) -> list[Path]:
    """Folders that LeRobot's streaming video encoder left in the dataset root when the recording was killed
    mid-episode: `tmpXXXXXXXX/` holding only `*_streaming.mp4` files (the episode in progress, never saved)."""
    return [folder for folder in sorted(root.glob("tmp*")) if folder.is_dir() and any(folder.iterdir())
            and all(item.is_file() and item.name.endswith("_streaming.mp4") for item in folder.iterdir())]
