"""Expert episodes -> a LeRobot dataset, written through LeRobot's own `LeRobotDataset` API.

Features (LeRobot names, SO-101 follower units): `observation.images.front` and `observation.images.wrist`
(videos), `observation.state` (6 joint positions), `action` (6 joint targets), and per frame the episode's
instruction as `task`; fps 30. Frame t holds the observation before action t is executed.

Episodes run in worker processes (one simulator each); the parent writes them in scene order, so a dataset is
a pure function of `(seed, episodes, profile, RecordConfig)`. Per-episode facts LeRobot's format has no
column for (piece, squares, scene seed/index, outcome, recovery) go to `meta/chess_sim.json`, beside
LeRobot's own metadata.

Crash safety: see `data/commit.py`; a run stopped by Ctrl-C (or `stop_after`) finalises the writer first, so the
dataset is loadable as it is.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from contextlib import closing
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from chess_sim.config import JOINT_NAMES, EnvConfig, RecordConfig, saved_as_today
from chess_sim.data.commit import Progress, commit, read_progress, roll_back_to_commit
from chess_sim.data.encoder import EncoderError, checked_encoder
from chess_sim.data.integrity import DatasetFilesError, checked_metadata, repo_id
from chess_sim.sim.episodes import expert_episode, ordered_map

MOTOR_NAMES = [f"{joint}.pos" for joint in JOINT_NAMES]
"""LeRobot's SO-101 follower names its state and action entries `<joint>.pos`."""


class RecordError(Exception):
    """A dataset directory that cannot be written as asked (one-line message for the CLI)."""


def features(cfg: EnvConfig) -> dict:
    shape = (cfg.camera.height, cfg.camera.width, 3)
    video = {"dtype": "video", "shape": shape, "names": ["height", "width", "channels"]}
    vector = {"dtype": "float32", "shape": (6,), "names": MOTOR_NAMES}
    return {"observation.images.front": video, "observation.images.wrist": dict(video),
            "observation.state": vector, "action": dict(vector)}


@dataclass
class Episode:
    """One expert episode as recorded: T frames."""

    index: int
    front: np.ndarray
    """(T, H, W, 3) uint8."""
    wrist: np.ndarray
    state: np.ndarray
    """(T, 6) float32: measured joints before each action."""
    action: np.ndarray
    """(T, 6) float32: the expert's command at each frame (never the perturbed one)."""
    row: dict
    recovery: bool
    physics_s: float
    render_s: float
    provenance: dict | None = None
    """Where the episode came from beyond the scene (DAgger: round, driving policy, decision and step of the
    takeover); None for the expert's own demonstrations."""


def is_recovery(seed: int, index: int, fraction: float) -> bool:
    """Whether scene `(seed, index)` is recorded as a recovery demonstration (its own random stream)."""
    return bool(np.random.default_rng([seed, index, 0xDA27]).random() < fraction)


class EpisodeRecorder:
    """The columns of an episode as the expert drives it: `observe()` before each step (both cameras, the measured
    joints), `keep(command)` the expert's command, which is the recorded action (and is returned to execute)."""

    def __init__(self, env):
        self.env = env
        self.columns: dict[str, list] = {"front": [], "wrist": [], "state": [], "action": []}
        self.render_s = 0.0

    def observe(self) -> None:
        started = time.perf_counter()
        images = self.env.camera_images()
        self.render_s += time.perf_counter() - started
        self.columns["front"].append(images["front"])
        self.columns["wrist"].append(images["wrist"])
        self.columns["state"].append(self.env.state())

    def keep(self, command: np.ndarray) -> np.ndarray:
        self.columns["action"].append(command)
        return command

    def episode(self, index: int, row: dict, recovery: bool, physics_s: float,
                provenance: dict | None = None) -> Episode:
        front, wrist, state, action = (np.stack(self.columns[name]) for name in ("front", "wrist", "state", "action"))
        return Episode(index=index, front=front, wrist=wrist, state=state, action=action, row=row, recovery=recovery,
                       physics_s=physics_s, render_s=self.render_s, provenance=provenance)


def record_episode(env, expert, seed: int, index: int, rec: RecordConfig) -> Episode:
    """Run the expert (`sim.expert.ExpertDriver`) on scene `(seed, index)` with rendering; recovery episodes
    execute a noisy command, while the recorded action stays the expert's own."""
    recovery = is_recovery(seed, index, rec.recovery_fraction)
    noise_rng = np.random.default_rng([seed, index, 0x0153])
    noise = np.zeros(6)
    innovation = rec.recovery_noise_deg * np.sqrt(1.0 - rec.recovery_noise_corr**2)
    recorder = EpisodeRecorder(env)

    def execute(command: np.ndarray) -> np.ndarray:
        recorder.keep(command)
        if not recovery:
            return command
        noise[:5] = rec.recovery_noise_corr * noise[:5] + innovation * noise_rng.standard_normal(5)
        if env.tcp_position()[2] - env.scene.board_top >= rec.recovery_min_height:
            return command + noise.astype(np.float32)
        return command

    row, physics_s = expert_episode(env, expert, seed, index, recorder.observe, execute)
    row.pop("seconds")
    return recorder.episode(index, row, recovery, physics_s)


_WORKER = None


def _init_worker(cfg: EnvConfig, rec: RecordConfig, source) -> None:
    global _WORKER
    os.environ.setdefault("MUJOCO_GL", "egl")
    from chess_sim.sim.env import ChessEnv
    from chess_sim.sim.expert import ExpertDriver

    env = ChessEnv(cfg)
    _WORKER = (env, ExpertDriver(env), rec, source, None if source is None else source.setup())


def _worker_record(job: tuple[int, int]) -> tuple[int, list[Episode], dict | None]:
    """One scene: (its index, the episodes to write, the driving policy's row under a scene source or None)."""
    env, expert, rec, source, state = _WORKER
    seed, index = job
    if source is None:
        return index, [record_episode(env, expert, seed, index, rec)], None
    return index, *source.scene(env, expert, state, seed, index)


def _config_dict(cfg: EnvConfig) -> dict:
    return json.loads(json.dumps(asdict(cfg)))


def _settings(rec: RecordConfig, source) -> dict:
    """The recording settings a resume must keep."""
    return {**asdict(rec), **({} if source is None else source.settings())}


def _open_dataset(root: Path, cfg: EnvConfig, settings: dict, seed: int, episodes: int, resume: bool,
                  encoder):
    """(dataset in write mode, progress) for a new or resumed recording; RecordError on a bad directory."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    progress = read_progress(root) if root.exists() else None
    if resume:
        if progress is None:
            raise RecordError(f"{root} holds no chess-sim recording to resume; drop --resume to start one")
        if (progress.seed, saved_as_today(progress.env), progress.record) != (seed, _config_dict(cfg), settings):
            raise RecordError(f"{root} was recorded with another seed, profile or recording settings; "
                              f"use a new --out")
        roll_back_to_commit(root, progress)
        progress.episodes = max(progress.episodes, episodes)
        progress.finished = False
        dataset = LeRobotDataset.resume(repo_id(root), root=root, rgb_encoder=encoder, **_streaming(cfg))
        return dataset, progress
    if root.exists() and any(root.iterdir()):
        if progress is not None and not progress.finished:
            raise RecordError(f"{root} holds an unfinished recording ({len(progress.saved)} episodes saved, "
                              f"scene {progress.next_index} of {progress.episodes} next): add --resume to "
                              f"continue it, or delete the directory to restart")
        raise RecordError(f"{root} exists and is not empty; choose a new --out (or --resume a recording)")
    if root.exists():
        root.rmdir()  # empty (checked above); LeRobot creates the directory itself
    dataset = LeRobotDataset.create(repo_id(root), fps=cfg.physics.control_hz, features=features(cfg),
                                    root=root, robot_type="so101_follower", use_videos=True,
                                    rgb_encoder=encoder, **_streaming(cfg))
    progress = Progress(seed=seed, episodes=episodes, env=_config_dict(cfg), record=settings)
    commit(root, progress)
    return dataset, progress


def record(root: Path, cfg: EnvConfig, rec: RecordConfig, seed: int, episodes: int, workers: int = 2,
           resume: bool = False, stop_after: int | None = None, backend: str = "local",
           source=None) -> dict:
    """Record scenes `(seed, 0..episodes-1)` into `root` with `workers` simulators (processes, or Ray actors with
    `backend="ray"`); returns a summary. Without `source` the expert demonstrates each scene; a `source` (DAgger,
    `imitation/dagger.py`) makes a scene's episodes itself in the workers: its `setup()` runs once per worker,
    `scene(env, expert, state, seed, index)` returns (episodes, a row for the summary), episodes ending in its
    `kept_ends` are written, `settings()` joins what a resume must keep and `summary(rows)` the summary. `stop_after`
    stops after the scene that brought this call's saved episodes to at least that many (tests of resumption)."""
    from chess_sim.progress import Progress as Bar

    _quiet_libraries()
    root = Path(root)
    cfg = replace(cfg, render=True)
    try:
        encoder = checked_encoder(rec.vcodec, rec.vpreset)
    except EncoderError as error:
        raise RecordError(str(error)) from None
    dataset, progress = _open_dataset(root, cfg, _settings(rec, source), seed, episodes, resume, encoder)
    jobs = [(seed, index) for index in range(progress.next_index, progress.episodes)]
    bar = Bar(len(jobs), "record")
    timing = {"physics_s": 0.0, "render_s": 0.0, "encode_s": 0.0}
    frames = 0
    saved_now = 0
    kept_ends = ("success",) if source is None else source.kept_ends
    scenes = ordered_map(_worker_record, jobs, workers, _init_worker, (cfg, rec, source), backend=backend)
    committed = (len(progress.saved), len(progress.failed))
    try:
        with closing(scenes):
            for index, scene_episodes, driven in scenes:
                for episode in scene_episodes:
                    timing["physics_s"] += episode.physics_s
                    timing["render_s"] += episode.render_s
                    if episode.row["end"] in kept_ends or rec.keep_failures:
                        start = time.perf_counter()
                        dataset = _save(dataset, root, episode, encoder, cfg)
                        timing["encode_s"] += time.perf_counter() - start
                        frames += len(episode.action)
                        progress.saved.append(_episode_meta(episode, len(progress.saved)))
                        saved_now += 1
                    else:
                        progress.failed.append(_episode_meta(episode, None))
                if driven is not None:
                    progress.driven.append(driven)
                progress.next_index = index + 1
                commit(root, progress)
                committed = (len(progress.saved), len(progress.failed))
                bar.advance(note=f"saved {len(progress.saved)}  failed {len(progress.failed)}")
                if stop_after is not None and saved_now >= stop_after:
                    break
    finally:
        dataset.finalize()
        if (len(progress.saved), len(progress.failed)) != committed:
            # stopped inside a scene (Ctrl-C between its episodes): back to the scene's start, as --resume would
            # do, so the dataset lists no episode that meta/chess_sim.json does not
            del progress.saved[committed[0]:], progress.failed[committed[1]:]
            roll_back_to_commit(root, progress)
        seconds = bar.close()
    progress.finished = progress.next_index >= progress.episodes
    commit(root, progress)
    return {**_summary(root, progress, frames, seconds, timing),
            **({} if source is None else source.summary(progress.driven))}


def _quiet_libraries() -> None:
    """FFmpeg's encoder statistics and the datasets library's progress bars would drown our progress line."""
    import av
    import datasets

    av.logging.set_level(av.logging.ERROR)
    datasets.disable_progress_bars()


def _streaming(cfg: EnvConfig) -> dict:
    """Encode while frames are added (no PNG round trip). LeRobot's streaming encoder drops a frame when its
    queue stays full for 0.1 s, which suits a live camera, not a batch: the queue holds a whole episode."""
    return {"streaming_encoding": True, "encoder_queue_maxsize": cfg.max_steps + 1}


def _save(dataset, root: Path, episode: Episode, encoder, cfg: EnvConfig):
    """Add an episode, save it, finalise and reopen the writer (each episode its own files)."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    task = episode.row["instruction"]
    for t in range(len(episode.action)):
        dataset.add_frame({"observation.images.front": episode.front[t], "observation.images.wrist": episode.wrist[t],
                           "observation.state": episode.state[t], "action": episode.action[t], "task": task})
    dataset.save_episode(parallel_encoding=False)
    dataset.finalize()
    return LeRobotDataset.resume(repo_id(root), root=root, rgb_encoder=encoder, **_streaming(cfg))


def _episode_meta(episode: Episode, dataset_index: int | None) -> dict:
    row = episode.row
    return {"episode_index": dataset_index, "scene_seed": row["seed"], "scene_index": row["index"],
            "piece": row["piece"], "color": row["color"], "from": row["from"], "to": row["to"],
            "instruction": row["instruction"], "end": row["end"], "recovery": episode.recovery,
            "frames": len(episode.action), **(episode.provenance or {})}


def _summary(root: Path, progress: Progress, frames: int, seconds: float, timing: dict) -> dict:
    busy = sum(timing.values()) or 1.0
    return {
        "dataset": str(root), "finished": progress.finished, "episodes_saved": len(progress.saved),
        "episodes_failed": len(progress.failed), "scenes_attempted": progress.next_index,
        "recovery_episodes": sum(e["recovery"] for e in progress.saved),
        "failures_by_end": dict(Counter(e["end"] for e in progress.failed)),
        "frames_this_run": frames, "seconds": seconds, "frames_per_s": frames / seconds if seconds else 0.0,
        "time_share": {key.removesuffix("_s"): value / busy for key, value in timing.items()},
    }



def inspect(root: Path) -> dict:
    """What a dataset holds: episodes, frames, pieces, instructions and feature statistics, read back
    through LeRobot's loader (so what it prints is what any LeRobot tool sees)."""
    root = Path(root)
    try:
        meta = checked_metadata(root)
    except DatasetFilesError as error:
        raise RecordError(str(error)) from None
    progress = read_progress(root)
    saved = progress.saved if progress else []
    stats = {}
    for key in ("observation.state", "action"):
        if key in meta.stats:
            stats[key] = {name: np.asarray(meta.stats[key][name]).round(2).tolist()
                          for name in ("mean", "std", "min", "max") if name in meta.stats[key]}
    return {
        "dataset": str(root), "fps": meta.fps, "robot_type": meta.robot_type,
        "episodes": meta.total_episodes, "frames": meta.total_frames,
        "finished": bool(progress and progress.finished),
        "features": {k: {"dtype": v["dtype"], "shape": list(v["shape"])} for k, v in meta.features.items()
                     if k in ("observation.images.front", "observation.images.wrist", "observation.state",
                              "action")},
        "pieces": dict(Counter(f"{e['color']} {e['piece']}" for e in saved)),
        "recovery_episodes": sum(e["recovery"] for e in saved),
        "failed_episodes": len(progress.failed) if progress else None,
        "instructions": sorted(meta.tasks.index.tolist()),
        "stats": stats,
    }
