"""RL rollout speed against raw physics (issue #21). Prints one JSON object.

    .venv/bin/python benchmarks/rollout.py [--policy models/baseline] [--episodes 512] [--repeats 3]
                                           [--envs N] [--eval-episodes 200] [--denoise-steps K --time-power P]
                                           [--no-policy-in-simulators] [--chain-dtype float32]

Each repeat collects `episodes` training episodes exactly as `chess-sim rl` does (the compact profile: its noise,
start spread, simulator count and observation size), then replays every episode's chunks as bare physics (`mj_step`
only, `VecChessEnv.physics_many`) on the same worker processes: each episode from its reset through the states the
rollout went through (the physics is deterministic), its last chunk cut where the episode ended, the simulators in
parallel, one chunk each per round, the resets untimed. `ratio` = rollout decisions/s over raw physics decisions/s;
the headline figures are medians over the repeats. Until December 6, 2026 the replay ran every chunk from an episode
start instead (a chunk made for the middle of an episode, from the arm's rest pose: fewer contacts, cheaper
physics); `ratio_chunks_from_starts` keeps that measure for comparison with older figures.
The core-second split sums the workers' physics (with judging), rendering (with the resize to the policy's input)
and resets, and the policy's decisions (in the simulators' processes under the profile's `policy_in_simulators`,
else in this process), all in CPU seconds (true when the processes share the cores).
`eval_200_s` is the wall time of a noise-free evaluation of the policy on the first `eval-episodes` test scenes
(0 skips it). `--denoise-steps` and `--time-power` sample the chain with K steps on the grid t_k = (1 - k/K)^p in
the rollouts and the evaluation (0: the policy's own). `--chain-dtype` sets the precision of the rollouts' chain
(`FilteredConfig.chain_dtype`; the profile's bfloat16 by default); the evaluation is float32 either way.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections import deque
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from chess_sim.config import CHAIN_DTYPES, RL_PROFILES, EvalConfig, profile, replace_fields  # noqa: E402
from chess_sim.eval import evaluate  # noqa: E402
from chess_sim.policy.base import DECISION_ROWS  # noqa: E402
from chess_sim.rl.rollout import RolloutDriver  # noqa: E402
from chess_sim.rl.storage import Storage  # noqa: E402
from chess_sim.rl.runner import build, training_env  # noqa: E402
from chess_sim.scheduler import drive  # noqa: E402
from chess_sim.sim.backends import make_vec_env  # noqa: E402

FIRST_SCENE = 900_000
"""Training scenes far beyond any run's: the benchmark never shares scenes with an experiment."""


class _Recording(RolloutDriver):
    """The training rollout's driver, keeping every episode's chunks (for the raw-physics replay)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.episodes: dict[int, list[np.ndarray]] = {}
        """Each episode's chunks by scene index, in order, the last cut to the actions executed."""
        self.decided: list[np.ndarray] = []
        """Every chunk as decided, uncut (the measure before December 6, 2026)."""
        self.rows_computed = 0

    def _keep(self, episode, chunk) -> None:
        self.episodes.setdefault(episode.index, []).append(chunk)
        self.decided.append(chunk)

    def _count_rows(self, episodes) -> None:
        """The rows one policy call computes for `episodes`: whole blocks."""
        self.rows_computed += -(-len(episodes) // DECISION_ROWS) * DECISION_ROWS

    def decide(self, episodes):
        chunks = super().decide(episodes)
        self._count_rows(episodes)
        for worker, episode in sorted(episodes.items()):
            self._keep(episode, chunks[worker])
        return chunks

    def draws(self, episodes):  # each call is one process's batch
        self._count_rows(episodes)
        return super().draws(episodes)

    def step(self, episode, result):
        if "actions" in result.info:  # decided in the simulator's process
            self._keep(episode, result.info["actions"])
        chunks = self.episodes[episode.index]
        chunks[-1] = chunks[-1][:result.info["executed"]]
        return super().step(episode, result)

    def forget(self, episode):
        self.episodes.pop(episode.index, None)  # it starts again from its reset
        super().forget(episode)


def rollout(algorithm, vec, cfg, first: int, generator) -> dict:
    driver = _Recording(algorithm, generator, Storage(), in_simulators=cfg.run.policy_in_simulators)
    clock: dict = {}
    began, cpu = time.perf_counter(), time.process_time()
    drive(vec, cfg.run.train_seed, list(range(first, first + cfg.run.episodes)), driver, clock=clock)
    wall, main_cpu = time.perf_counter() - began, time.process_time() - cpu
    decisions = sum(len(chunks) for chunks in driver.episodes.values())
    raw = replayed_physics(vec, cfg.run.train_seed, driver.episodes)
    from_starts = physics_from_starts(vec, cfg.run.train_seed, first, driver.decided)
    core = {"physics": driver.parts["physics"], "rendering": driver.parts["render"],
            "policy": driver.parts["policy"], "resets": driver.parts["resets"]}
    return {"decisions": decisions, "episodes": len(driver.rows), "wall_s": wall,
            "decisions_per_s": decisions / wall, "raw_physics_decisions_per_s": decisions / raw,
            "ratio": raw / wall, "ratio_chunks_from_starts": from_starts / wall,
            "block_fill": decisions / driver.rows_computed, "core_s": core,
            "main_process_cpu_s": main_cpu, "main_process_wall_s": {
                "decide": clock["decide"], "waiting_for_simulators": clock["env"]}}


def replayed_physics(vec, seed: int, episodes: dict[int, list[np.ndarray]]) -> float:
    """Wall seconds for the bare physics of every episode's chunks, each episode replayed from its reset on one
    simulator, all simulators in parallel, one chunk each per round; the resets are not timed."""
    pending = deque(sorted(episodes.items()))
    running: dict[int, deque] = {}
    wall = 0.0
    while pending or running:
        starting = {}
        for env in range(vec.n):
            if env not in running and pending:
                index, chunks = pending.popleft()
                running[env], starting[env] = deque(chunks), (seed, index)
        if starting:
            vec.reset_many(starting)
        batch = {env: chunks.popleft() for env, chunks in running.items()}
        began = time.perf_counter()
        vec.physics_many(batch, advance=True)
        wall += time.perf_counter() - began
        running = {env: chunks for env, chunks in running.items() if chunks}
    return wall


def physics_from_starts(vec, seed: int, first: int, chunks: list[np.ndarray]) -> float:
    """Wall seconds for the bare physics of `chunks` run each from a simulator's episode start (the measure before
    December 6, 2026), all simulators in parallel, one chunk each per round."""
    vec.reset_many({env: (seed, first + env) for env in range(vec.n)})
    wall = 0.0
    for start in range(0, len(chunks), vec.n):
        batch = {env: chunk for env, chunk in enumerate(chunks[start:start + vec.n])}
        began = time.perf_counter()
        vec.physics_many(batch)
        wall += time.perf_counter() - began
    return wall


def main() -> None:
    compact = RL_PROFILES["compact"]
    parser = argparse.ArgumentParser()
    parser.add_argument("--policy", type=Path, default=Path("models/baseline"))
    parser.add_argument("--episodes", type=int, default=compact.run.episodes, help="training episodes per repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--envs", type=int, default=compact.run.envs, help="simulators (default: the profile's)")
    parser.add_argument("--eval-episodes", type=int, default=200)
    parser.add_argument("--denoise-steps", type=int, default=0, help="K of the chain (0: the policy's own)")
    parser.add_argument("--time-power", type=int, default=0, help="p of the chain's time grid (0: the policy's own)")
    parser.add_argument("--policy-in-simulators", action=argparse.BooleanOptionalAction,
                        default=compact.run.policy_in_simulators,
                        help="decide in the simulators' processes (default: the profile's)")
    parser.add_argument("--chain-dtype", choices=CHAIN_DTYPES, default=compact.filtered.chain_dtype,
                        help="precision of the rollouts' chain (default: the profile's)")
    args = parser.parse_args()
    sampler = {"denoise_steps": args.denoise_steps, "time_power": args.time_power}
    cfg = replace_fields(compact, episodes=args.episodes, envs=args.envs,
                         policy_in_simulators=args.policy_in_simulators, chain_dtype=args.chain_dtype,
                         **sampler).config()
    torch.set_num_threads(cfg.run.torch_threads)
    algorithm = build(args.policy, cfg)
    model = algorithm.model
    generator = torch.Generator().manual_seed(cfg.run.seed)
    env_cfg = training_env(model, profile("baseline"))
    with make_vec_env(cfg.run.envs, env_cfg) as vec:
        # a warm-up round (process start-up, scene compilation, first renders) that the figures leave out
        rollout(algorithm, vec, replace(cfg, run=replace(cfg.run, episodes=vec.n)), FIRST_SCENE - vec.n, generator)
        repeats = [rollout(algorithm, vec, cfg, FIRST_SCENE + r * args.episodes, generator) for r in range(args.repeats)]
        processes = vec.processes
    result = {
        "policy": str(args.policy), "denoise_steps": model.policy.steps, "time_power": model.policy.time_power,
        "envs": cfg.run.envs, "processes": processes, "cores": os.cpu_count(),
        "policy_in_simulators": cfg.run.policy_in_simulators, "chain_dtype": cfg.algorithm.chain_dtype,
        "observation_size": env_cfg.camera.observation_size, "episodes_per_repeat": args.episodes,
        **{key: statistics.median(r[key] for r in repeats)
           for key in ("decisions_per_s", "raw_physics_decisions_per_s", "ratio", "ratio_chunks_from_starts")},
        "ratio_target": 0.4, "repeats": repeats,
    }
    total = {part: sum(r["core_s"][part] for r in repeats) for part in repeats[0]["core_s"]}
    decisions = sum(r["decisions"] for r in repeats)
    result["core_ms_per_decision"] = {part: 1000 * seconds / decisions for part, seconds in total.items()}
    if args.eval_episodes:
        with tempfile.TemporaryDirectory() as tmp:
            began = time.perf_counter()
            eval_cfg = EvalConfig(episodes=args.eval_episodes, envs=cfg.run.envs, **sampler)
            summary, _, _ = evaluate(args.policy, Path(tmp) / "eval", eval_cfg, profile("baseline"))
            result[f"eval_{args.eval_episodes}_s"] = time.perf_counter() - began
            result[f"eval_{args.eval_episodes}_success"] = summary["success"]
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
