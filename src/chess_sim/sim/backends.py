"""The simulator backend factory: `n` simulators as local worker processes (`sim/vec_env.py`) or as Ray actors
(`sim/ray_env.py`), behind the same interface."""

from __future__ import annotations

from chess_sim.config import BACKENDS, EnvConfig, RewardConfig
from chess_sim.sim.vec_env import VecChessEnv


def make_vec_env(n: int, cfg: EnvConfig, seconds: float | None = None, reward: RewardConfig | None = None,
                 backend: str = "local") -> VecChessEnv:
    """`n` simulators on `backend`: locally one worker process per core (at most n), or Ray actors."""
    if backend == "ray":
        from chess_sim.sim.ray_env import RayVecChessEnv

        return RayVecChessEnv(n, cfg, seconds, reward)
    if backend != "local":
        raise ValueError(f"unknown simulator backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    return VecChessEnv(n, cfg, seconds, reward)
