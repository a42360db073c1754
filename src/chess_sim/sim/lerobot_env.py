"""ChessEnv as LeRobot's evaluation drives a Gymnasium benchmark (`lerobot-eval --env.type=chess_sim`, through the
`lerobot_env_chess_sim` plugin): built from flat keyword arguments, and the reset seed picks the scene.

`lerobot-eval` resets its i-th episode with `seed=S + i` (S its `--seed`, 1000 by default) and later ones, after
Gymnasium's autoreset, without a seed. Here `reset(seed=n)` plays scene `(scene_seed, n)` and a reset without a
seed the next index, so `lerobot-eval --seed=0 --eval.n_episodes=N` plays the scenes `chess-sim eval --episodes N`
plays (the test seed's indices 0..N-1), with the same judge. Observations, `info["is_success"]`,
`task_description` and `_max_episode_steps` are ChessEnv's own.
"""

from __future__ import annotations

from dataclasses import replace

from chess_sim.config import TEST_SEED, profile
from chess_sim.sim.env import ChessEnv


class LeRobotChessEnv(ChessEnv):
    """ChessEnv whose reset seed is the scene index on a fixed scene seed (see the module docstring)."""

    def __init__(self, scene_seed: int = TEST_SEED, env_profile: str = "baseline", early_stop: bool = True,
                 observation_size: int | None = None, render_mode: str | None = "rgb_array", tasks: str | None = None):
        cfg = profile(env_profile, tasks)
        cfg = replace(cfg, early_stop=early_stop, camera=replace(cfg.camera, observation_size=observation_size))
        super().__init__(cfg, render_mode=render_mode, seed=scene_seed)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        # LeRobot's rollout marks its resets for its own wrappers (`lerobot_new_rollout`): not a scene option
        options = {key: value for key, value in (options or {}).items() if not str(key).startswith("lerobot_")}
        if seed is not None and "index" not in options:
            options["index"] = seed
        return super().reset(seed=None if seed is None else self._scene_seed, options=options)
