"""Whether a LeRobot dataset's files are all there and readable, checked before anything trains on it.

LeRobot's loader meets a missing data file by trying to download it (an error about the hub, offline here) and a
damaged video only when a sample needs it, deep inside a training run. Here every file the episode metadata
names must exist, and every video must open and be as long as its episodes (an MP4 cut short loses its index or
its last frames).
"""

from __future__ import annotations

from pathlib import Path

from chess_sim.errors import first_line


def repo_id(root: Path) -> str:
    """The repository id LeRobot is given for a local dataset (never fetched: the hub stays offline)."""
    return f"chess-sim/{Path(root).name}"


class DatasetFilesError(ValueError):
    """A file the dataset needs is missing or damaged (one-line message for the CLI)."""


def checked_metadata(root: Path):
    """LeRobot's `LeRobotDatasetMetadata` of the dataset at `root`, once its files are checked (`check_files`);
    DatasetFilesError for a folder that is not a dataset or whose metadata is damaged."""
    from lerobot.datasets.lerobot_dataset import LeRobotDatasetMetadata

    root = Path(root)
    if not (root / "meta" / "info.json").is_file():
        raise DatasetFilesError(f"{root} is not a LeRobot dataset (no meta/info.json)")
    try:
        meta = LeRobotDatasetMetadata(repo_id(root), root=root)
    except Exception as error:  # noqa: BLE001 - LeRobot's many ways of failing on a damaged folder are bad input here
        raise DatasetFilesError(f"{root} holds damaged LeRobot metadata ({type(error).__name__}: "
                                f"{first_line(error)})") from None
    check_files(meta)
    return meta


def check_files(meta) -> None:
    """Raise DatasetFilesError naming the first missing or unreadable file of a `LeRobotDatasetMetadata`."""
    root = Path(meta.root)
    videos: dict[Path, float] = {}
    """Each video file and the latest timestamp its episodes need, seconds."""
    needed_data = set()
    for episode in range(meta.total_episodes):
        data = root / meta.get_data_file_path(episode)
        needed_data.add(data)
        if not data.is_file():
            raise DatasetFilesError(f"{root} is missing {data.relative_to(root)} (episode {episode}'s frames)")
        for key in meta.video_keys:
            path = root / meta.get_video_file_path(episode, key)
            end = float(meta.episodes[episode][f"videos/{key}/to_timestamp"])
            videos[path] = max(videos.get(path, 0.0), end)
    # LeRobot reads every frame file in data/: one that no saved episode owns is what a killed recording left
    strays = sorted(set((root / "data").rglob("*.parquet")) - needed_data)
    if strays:
        raise DatasetFilesError(f"{root} holds {strays[0].relative_to(root)}, a frame file of no saved episode (left "
                                f"by a killed recording?): `chess-sim record --resume` removes it")
    for path, needed in videos.items():
        if not path.is_file():
            raise DatasetFilesError(f"{root} is missing {path.relative_to(root)}")
        duration = _video_seconds(path)
        if duration is None:
            raise DatasetFilesError(f"{root} has a damaged video {path.relative_to(root)} (it does not open)")
        if duration + 1.0 / meta.fps < needed:
            raise DatasetFilesError(f"{root} has a video cut short: {path.relative_to(root)} holds {duration:.2f} s, "
                                    f"its episodes need {needed:.2f} s")


def _video_seconds(path: Path) -> float | None:
    """The video's duration from its container, or None when it cannot be opened."""
    import av

    try:
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            if stream.duration is not None and stream.time_base is not None:
                return float(stream.duration * stream.time_base)
            return container.duration / 1_000_000 if container.duration else 0.0
    except (av.error.FFmpegError, IndexError, OSError):
        return None
