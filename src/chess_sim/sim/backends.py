"""The simulator backend factory: `n` simulators as local worker processes (`sim/vec_env.py`) or as Ray actors
(`sim/ray_env.py`), behind the same interface."""

from __future__ import annotations

import os
from pathlib import Path

from chess_sim.config import BACKENDS, EnvConfig, RewardConfig
from chess_sim.sim.vec_env import VecChessEnv

SIMULATOR_MB = 40
"""Memory of one more local simulator: its MuJoCo model, data and renderers, with room for larger frames than the
default cameras' (the measurement behind it: docs/benchmarks.md)."""
PROCESS_MB = 1200
"""Memory of one simulator process before its simulators: Python, MuJoCo, torch and a policy copy (measured with
the compact policy deciding in the simulators: docs/benchmarks.md)."""


def local_capacity(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    """How many local simulators this machine's available memory holds (None where it cannot be read): its
    MemAvailable, less one process per core, in SIMULATOR_MB each."""
    try:
        fields = dict(line.split(":", 1) for line in meminfo.read_text().splitlines() if ":" in line)
        available_mb = int(fields["MemAvailable"].split()[0]) // 1024
    except (OSError, KeyError, ValueError):
        return None
    return max(1, (available_mb - PROCESS_MB * (os.cpu_count() or 1)) // SIMULATOR_MB)


def check_capacity(n: int, backend: str = "local") -> None:
    """ValueError (one line) when `n` local simulators would not fit in this machine's memory (Ray actors are
    placed by Ray, and are not checked here)."""
    capacity = local_capacity() if backend == "local" else None
    if capacity is not None and n > capacity:
        raise ValueError(f"{n} simulators do not fit in this machine's available memory, at most {capacity} do "
                         f"(about {SIMULATOR_MB} MB each, beside {PROCESS_MB} MB per process)")


def make_vec_env(n: int, cfg: EnvConfig, seconds: float | None = None, reward: RewardConfig | None = None,
                 backend: str = "local") -> VecChessEnv:
    """`n` simulators on `backend`: locally one worker process per core (at most n), or Ray actors."""
    if backend == "ray":
        from chess_sim.sim.ray_env import RayVecChessEnv

        return RayVecChessEnv(n, cfg, seconds, reward)
    if backend != "local":
        raise ValueError(f"unknown simulator backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    check_capacity(n)
    return VecChessEnv(n, cfg, seconds, reward)
