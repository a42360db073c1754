"""The evaluation protocol: a policy (or the scripted expert) on the fixed scenes `(seed, 0..N-1)`.

Episodes run in parallel simulators (`VecChessEnv`); at every round the policy decides for all running
episodes in one batch. Each episode owns a torch generator seeded with its scene's `torch_seed`, from which
every decision draws x_0 (B=1, T, C; scaled by `start_spread`) and, with `noise`, the chain's step noise
(1, K, T, C), in that order: two policies evaluated on the same scenes see the same draws (a paired comparison),
whatever the schedule. A decision executes the first `action_steps` actions of its chunk (the policy's own, or
`cfg.action_steps`), then the policy decides again; evaluations at different `action_steps` draw for different
decisions, so they are paired by scene only.

Output folder: `summary.json` (summary keys with Wilson 95% intervals), `episodes.csv` (one row per scene, in
index order), `videos/episode_XXXX.mp4` (the first K episodes) and `eval_args.json`. Both result files are
pure functions of the arguments (the policy's thread count among them, `policy_threads`), so a second run writes
them byte-identical. Finished episodes are appended to
`progress.jsonl` as they end, so `resume` re-runs only the episodes that had not finished.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import torch

from chess_sim import atomic, jsonl
from chess_sim.config import EnvConfig, EvalConfig, saved_as_today
from chess_sim.policy.base import observed_env, use_sampler
from chess_sim.policy.lerobot_policy import LeRobotPolicy
from chess_sim.policy.loading import check_reads
from chess_sim.progress import Progress
from chess_sim.report.summary import summarize
from chess_sim.report.tables import write_csv
from chess_sim.threads import torch_threads

EXPERT = "expert"
"""`--policy expert`: the scripted expert instead of a policy directory."""


class EvalError(Exception):
    """Bad input for an evaluation (one-line message for the CLI)."""


@dataclass
class _Episode:
    """A running episode on one simulator."""

    index: int
    observation: dict
    info: dict
    generator: torch.Generator
    expert_solvable: bool | None
    """From the reset with `check_expert`; None when not checked."""
    video: object | None = None
    total: float = 0.0
    decisions: int = 0


@dataclass
class Timing:
    """Wall time of an evaluation, split by where it went."""

    policy_s: float = 0.0
    """Policy encode + sampling in this process."""
    simulate_s: float = 0.0
    """Waiting for the simulators (physics, rendering and resets in the workers, plus the transfer), beyond
    what overlapped the policy's decisions for the other group."""
    physics_s: float = 0.0
    """Physics and judging, CPU seconds summed over the workers."""
    render_s: float = 0.0
    """Rendering, CPU seconds summed over the workers."""
    total_s: float = 0.0
    restarts: int = 0
    """Simulator workers restarted after dying."""


def evaluate(policy, out: Path, cfg: EvalConfig, env_cfg: EnvConfig, resume: bool = False,
             label: str | None = None, backend: str = "local",
             trust_remote_code: bool = False) -> tuple[dict, list[dict], Timing]:
    """Run (or finish) an evaluation of `policy` (a policy directory, "expert", or a FlowPolicy object named by
    `label`) into `out`, the simulators on `backend` (`config.BACKENDS`; outcomes do not depend on it);
    returns (summary, rows in index order, timing). `trust_remote_code`: a LeRobot checkpoint's processors may
    run code of their own (`policy.lerobot_policy.check_processor_code`)."""
    out = Path(out)
    is_object = not isinstance(policy, (str, Path))
    threads = None if policy == EXPERT else policy_threads()
    # the thread count is an argument: it changes a policy's last bits, so a resume must keep it
    arguments = {"policy": label if is_object else str(policy), "eval": _saved_settings(cfg), "env": asdict(env_cfg),
                 "policy_threads": threads}
    policy = policy if is_object else _open_policy(policy, trust_remote_code)
    has_chain = policy != EXPERT and not isinstance(policy, LeRobotPolicy)
    chain_settings = cfg.noise is not None or cfg.start_spread != 1.0 or cfg.denoise_steps or cfg.time_power
    if chain_settings and not has_chain:
        raise EvalError("--noise, --start-spread, --denoise-steps and --time-power act on the chess-sim flow "
                        "policies' chain; this policy has no such chain")
    _check_action_steps(policy, cfg)
    if has_chain:
        try:
            use_sampler(policy, cfg.denoise_steps, cfg.time_power)
        except ValueError as error:
            raise EvalError(str(error)) from None
    if policy != EXPERT:
        try:
            check_reads(policy, env_cfg.scene.tasks)
        except ValueError as error:
            raise EvalError(str(error)) from None
    rows = _prepare_out(out, arguments, resume)
    todo = [i for i in range(cfg.episodes) if i not in rows]
    timing = Timing()
    started = time.perf_counter()
    if todo:
        with torch_threads(threads):
            _run(policy, todo, out, cfg, env_cfg, rows, timing, backend)
    timing.total_s = time.perf_counter() - started
    ordered = [rows[i] for i in range(cfg.episodes)]
    summary = summarize(ordered)
    if cfg.check_expert:
        solvable = summarize([row for row in ordered if row["expert_solvable"]])
        summary["expert_solvable"] = solvable["episodes"]
        summary["success_expert_solvable"] = solvable["success"]
        summary["success_expert_solvable_ci"] = solvable["success_ci"]
    atomic.write_text(out / "summary.json", json.dumps(summary, indent=2, sort_keys=True) + "\n")
    write_csv(out / "episodes.csv", ordered)
    return summary, ordered, timing


def validate(policy, directory: Path, cfg: EvalConfig, env_cfg: EnvConfig, label: str, backend: str = "local") -> dict:
    """A validation during training: evaluate the policy object into `directory` afresh (whatever an
    interrupted attempt left there is removed first); returns the summary."""
    shutil.rmtree(directory, ignore_errors=True)
    summary, _, _ = evaluate(policy, directory, cfg, env_cfg, label=label, backend=backend)
    return summary


def _saved_settings(cfg: EvalConfig) -> dict:
    """`cfg` as an evaluation's arguments; the chain's sampler left out where it is the policy's own, so that
    evaluations written before those settings existed still resume."""
    settings = asdict(cfg)
    for name in ("denoise_steps", "time_power"):
        if not settings[name]:
            del settings[name]
    return settings


def _check_action_steps(policy, cfg: EvalConfig) -> None:
    if not cfg.action_steps:
        return
    if policy == EXPERT:
        raise EvalError("--action-steps acts on a policy's chunks; the scripted expert decides at every step")
    most = policy.action_steps if isinstance(policy, LeRobotPolicy) else policy.chunk
    if cfg.action_steps > most:
        raise EvalError(f"--action-steps {cfg.action_steps}: this policy's decisions give {most} actions")


def _open_policy(policy_dir, trust_remote_code: bool = False):
    if str(policy_dir) == EXPERT:
        return EXPERT
    from chess_sim.policy.loading import load_evaluated

    try:
        return load_evaluated(policy_dir, trust_remote_code)
    except ValueError as error:
        raise EvalError(str(error)) from None


def _prepare_out(out: Path, arguments: dict, resume: bool) -> dict[int, dict]:
    """Check that `out` is new, or (with resume) holds this same evaluation; returns the finished rows."""
    args_path = out / "eval_args.json"
    text = json.dumps(arguments, indent=2, sort_keys=True) + "\n"
    if resume and not args_path.is_file():  # --resume means the same on every verb: continue, never start
        raise EvalError(f"{out} holds no evaluation to resume; run it without --resume")
    if out.exists() and any(out.iterdir()):
        if not args_path.is_file():
            raise EvalError(f"{out} is not empty and holds no evaluation; choose a new --out")
        if _saved_arguments(args_path) != text:
            raise EvalError(f"{out} holds an evaluation with other arguments; choose a new --out")
        if not resume:
            raise EvalError(f"{out} already holds this evaluation; add --resume to finish it or choose a new --out")
    out.mkdir(parents=True, exist_ok=True)
    atomic.write_text(args_path, text)
    # A row cut short by a kill is dropped: that episode runs again.
    return {row["index"]: row for row in jsonl.keep(out / "progress.jsonl", lambda row: "index" in row)}


def _saved_arguments(path: Path) -> str:
    """The arguments saved at `path` as this version saves the same evaluation (`config.saved_as_today`); the text
    itself where it is no such JSON object."""
    text = path.read_text()
    try:
        saved = json.loads(text)
    except ValueError:
        return text
    if not isinstance(saved, dict) or not isinstance(saved.get("env"), dict):
        return text
    return json.dumps({**saved, "env": saved_as_today(saved["env"])}, indent=2, sort_keys=True) + "\n"


def policy_threads() -> int:
    """Threads of the policy in an evaluation: half the cores this process may use. Simulator processes work while
    the policy decides; the count changes a policy's floating-point results (an ACT's trajectory diverged between 1
    and 2 threads), so it follows the machine, never `--envs`."""
    return max(1, len(os.sched_getaffinity(0)) // 2)


def _run(policy, todo: list[int], out: Path, cfg: EvalConfig, env_cfg: EnvConfig, rows: dict, timing: Timing,
         backend: str):
    from chess_sim.scheduler import drive
    from chess_sim.sim.backends import make_vec_env

    is_expert = policy == EXPERT
    env_cfg = replace(env_cfg, render=not is_expert, early_stop=cfg.early_stop)
    if not is_expert:
        env_cfg = observed_env(policy, env_cfg)
    options = {"check_expert": True} if cfg.check_expert else {}
    bar = Progress(len(todo), "eval")
    clock: dict = {}
    with make_vec_env(min(cfg.envs, len(todo)), env_cfg, backend=backend) as vec:
        driver = _EvalDriver(policy, out, cfg, env_cfg, rows, out / "progress.jsonl", bar, timing)
        drive(vec, cfg.seed, todo, driver, options, clock)
        timing.restarts = vec.restarts
    timing.policy_s += clock["decide"]
    timing.simulate_s += clock["env"]
    bar.close()


class _EvalDriver:
    """Evaluation episodes for `scheduler.drive`: batched deterministic (or ReinFlow-noisy) decisions, videos,
    one row per finished episode appended to `progress.jsonl`."""

    def __init__(self, policy, out: Path, cfg: EvalConfig, env_cfg: EnvConfig, rows: dict, progress, bar,
                 timing: Timing):
        self.policy, self.out, self.cfg, self.env_cfg = policy, out, cfg, env_cfg
        self.rows, self.progress, self.bar, self.timing = rows, progress, bar, timing

    def start(self, index: int, observation: dict, info: dict) -> _Episode:
        video = None
        if index < self.cfg.videos:
            from chess_sim.video import EpisodeVideo

            video = EpisodeVideo(self.out / "videos" / f"episode_{index:04d}.mp4", info["instruction"],
                                 fps=self.env_cfg.physics.control_hz)
            video.add(info.pop("frames")[0], 0)
        generator = torch.Generator().manual_seed(info["torch_seed"])
        return _Episode(index, observation, info, generator, info.get("expert_solvable"), video)

    def decide(self, episodes: dict[int, _Episode]) -> dict[int, np.ndarray] | None:
        return None if self.policy == EXPERT else _decide(self.policy, episodes, self.cfg)

    def filmed(self, index: int) -> bool:
        return index < self.cfg.videos

    def forget(self, episode: _Episode) -> None:
        if episode.video is not None:
            episode.video.discard()

    def step(self, episode: _Episode, result) -> bool:
        info = result.info
        self.timing.physics_s += info.get("physics_s", 0.0)
        self.timing.render_s += info.get("render_s", 0.0)
        episode.total += result.reward
        episode.decisions += 1
        episode.observation, episode.info = result.observation, info
        if episode.video is not None:
            episode.video.add_chunk(info)
        if not (result.terminated or result.truncated):
            return False
        row = _finish(episode, info, self.env_cfg.physics.control_hz)
        self.rows[row["index"]] = row
        jsonl.append(self.progress, row)
        done = self.rows.values()
        self.bar.advance(note=f"success {sum(r['end'] == 'success' for r in done)}/{len(done)}")
        return True


def _finish(episode: _Episode, info: dict, control_hz: int) -> dict:
    from chess_sim.sim.judge import episode_row

    row = episode_row(info)
    row.update({"move": info["move"], "return": episode.total, "decisions": episode.decisions,
                "seconds": info["steps"] / control_hz})
    if episode.expert_solvable is not None:
        row["expert_solvable"] = episode.expert_solvable
    if episode.video is not None:
        episode.video.close(info["end"])
    return row


def _decide(policy, active: dict[int, _Episode], cfg: EvalConfig) -> dict[int, np.ndarray]:
    """One decision for every running episode, in one policy batch: {worker: actions (S, 6) in SO-101 units}."""
    workers = sorted(active)
    episodes = [active[worker] for worker in workers]
    chunks = decide(policy, [e.observation for e in episodes], [e.info["instruction"] for e in episodes],
                    [e.generator for e in episodes], cfg)
    return {worker: chunks[i] for i, worker in enumerate(workers)}


@torch.no_grad()
def decide(policy, observations: list[dict], instructions: list[str], generators: list[torch.Generator],
           cfg: EvalConfig) -> np.ndarray:
    """The evaluation protocol's decision for B observations (env format) in one policy batch: the actions to
    execute (B, S, 6) in SO-101 units, S = `cfg.action_steps` or the policy's own. Each row draws its x_0 (scaled by
    `cfg.start_spread`) and, with `cfg.noise`, its chain noise from its own generator (see the module docstring)."""
    from chess_sim.policy.base import chunk_actions, in_blocks, noise_schedule, observation_batch, sample_chain

    batch = observation_batch(observations, instructions)
    executed = cfg.action_steps or policy.action_steps
    if isinstance(policy, LeRobotPolicy):
        return policy.act(batch, generators)[:, :executed]
    shape = (1, policy.chunk, policy.chain_dim)
    x0, noise = [], []
    for generator in generators:
        x0.append(cfg.start_spread * torch.randn(shape, generator=generator))
        if cfg.noise is not None:
            noise.append(torch.randn((1, policy.steps, *shape[1:]), generator=generator))
    sigmas = noise_schedule(*cfg.noise, policy.steps) if cfg.noise is not None else None
    chain = in_blocks(lambda rows, start, steps: sample_chain(policy, policy.encode(rows), start, sigmas, steps),
                      batch, torch.cat(x0), torch.cat(noise) if noise else None)
    return chunk_actions(policy, chain[:, -1])[:, :executed].numpy()
