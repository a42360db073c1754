"""chess-sim's scenes as a LeRobot environment: `lerobot-eval --env.type=chess_sim --policy.path=DIR`.

LeRobot imports this package at start-up (it imports every installed `lerobot_env_*` distribution); importing it
registers the `chess_sim` environment type with LeRobot and the Gymnasium id `lerobot_env_chess_sim/ChessSim-v0`
(`chess_sim.sim.lerobot_env.LeRobotChessEnv`). Options: `--env.scene_seed` (the test seed by default),
`--env.env_profile` (baseline, randomized), `--env.tasks` (pawn-knight, all-pieces, captures),
`--env.early_stop`, `--env.observation_size` (None: the 256-pixel
frames the datasets hold). Use `--seed=0` to play the scenes `chess-sim eval` plays (lerobot-eval's i-th episode
plays scene index seed + i).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import gymnasium
from lerobot.configs import FeatureType, PolicyFeature
from lerobot.envs.configs import EnvConfig
from lerobot.utils.constants import ACTION, OBS_IMAGES, OBS_STATE

from chess_sim.config import ACTION_DIM, CAMERAS, PROFILES, TASK_PROFILES, TEST_SEED, SceneConfig, profile

PACKAGE = "lerobot_env_chess_sim"
TASK = "ChessSim-v0"

if f"{PACKAGE}/{TASK}" not in gymnasium.registry:
    gymnasium.register(id=f"{PACKAGE}/{TASK}", entry_point="chess_sim.sim.lerobot_env:LeRobotChessEnv")


@EnvConfig.register_subclass("chess_sim")
@dataclass
class ChessSimEnv(EnvConfig):
    """The SO-101 moving one chess piece (chess-sim): observations `pixels/front`, `pixels/wrist` (H, W, 3) uint8
    and `agent_pos` (6,), actions (6,) joint targets in SO-101 units at 30 Hz."""

    task: str | None = TASK
    fps: int = 30
    scene_seed: int = TEST_SEED
    env_profile: str = "baseline"
    tasks: str = SceneConfig.tasks
    early_stop: bool = True
    observation_size: int | None = None
    features: dict[str, PolicyFeature] = field(default_factory=dict)
    features_map: dict[str, str] = field(default_factory=lambda: {
        ACTION: ACTION, "agent_pos": OBS_STATE,
        **{f"pixels/{camera}": f"{OBS_IMAGES}.{camera}" for camera in CAMERAS}})

    def __post_init__(self):
        if self.env_profile not in PROFILES:
            raise ValueError(f"unknown env_profile {self.env_profile!r}; known: {', '.join(sorted(PROFILES))}")
        if self.tasks not in TASK_PROFILES:
            raise ValueError(f"unknown tasks {self.tasks!r}; known: {', '.join(TASK_PROFILES)}")
        if self.observation_size is not None and self.observation_size < 1:
            raise ValueError(f"observation_size must be a positive number of pixels, got {self.observation_size}")
        camera = profile(self.env_profile).camera
        image = (camera.height, camera.width, 3) if self.observation_size is None else (
            self.observation_size, self.observation_size, 3)
        self.features = {ACTION: PolicyFeature(type=FeatureType.ACTION, shape=(ACTION_DIM,)),
                         "agent_pos": PolicyFeature(type=FeatureType.STATE, shape=(ACTION_DIM,)),
                         **{f"pixels/{camera}": PolicyFeature(type=FeatureType.VISUAL, shape=image)
                            for camera in CAMERAS}}

    @property
    def package_name(self) -> str:
        return PACKAGE

    @property
    def gym_kwargs(self) -> dict:
        return {"scene_seed": self.scene_seed, "env_profile": self.env_profile, "tasks": self.tasks,
                "early_stop": self.early_stop, "observation_size": self.observation_size}
